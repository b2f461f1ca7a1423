import Foundation

/// The writes waiting for the one under way, and whether one is.
package final class WriteGroups: Sendable {
    private struct State {
        /// Groups under way.
        var running = 0
        var waiting: [GroupedWrite] = []
        /// The callers of the last group that ended with nobody waiting: the first of them to
        /// write again leads, and lets the rest come rather than commit alone.
        var siblings = 0
        var stats = GroupStats()

        /// A write leads a group of its own at once: returns how many callers of the last group
        /// may be about to join it.
        mutating func lead() -> Int {
            running += 1
            defer { siblings = 0 }
            return siblings
        }
    }

    /// What the groups committed so far held.
    package struct GroupStats: Sendable, Equatable {
        /// Groups ended (a lone write is a group of one).
        package var groups = 0
        /// Writes given their outcome.
        package var writes = 0
        /// The most writes one group held.
        package var largest = 0
    }

    private let state = Locked(State())
    /// How many groups may run side by side: 1 where writers take turns anyway, more
    /// where each runs on a connection of its own and the server commits them side by side.
    private let concurrency: Int
    /// Where the transactions of groups run when writers take turns (see ``GroupCommitQueue``).
    let committer = GroupCommitQueue()

    init(concurrency: Int = 1) {
        self.concurrency = max(1, concurrency)
    }

    /// Whether a group's transaction takes in the writes that arrive while it runs: where writers
    /// take turns, so that one transaction at a time is under way (see
    /// ``CountdownStore/groupedWriting(_:notifies:start:_:)``).
    var takesLateWrites: Bool { concurrency == 1 }

    /// Either makes `write` the leader of a group of its own at once (fewer groups than allowed
    /// were under way), or queues it and waits to be told its result or to lead the next group.
    func join(_ write: GroupedWrite) async -> GroupRole {
        let concurrency = self.concurrency
        let leads = state.withLock { state -> Int? in
            guard state.running < concurrency else { return nil }
            return state.lead()
        }
        if let siblings = leads { return .lead([write], siblings: siblings) }
        return await withCheckedContinuation { (continuation: CheckedContinuation<GroupRole, Never>) in
            let leadsNow = state.withLock { state -> Int? in
                // A group may have ended between the two looks.
                guard state.running >= concurrency else { return state.lead() }
                write.continuation = continuation
                state.waiting.append(write)
                return nil
            }
            if let siblings = leadsNow { continuation.resume(returning: .lead([write], siblings: siblings)) }
        }
    }

    /// Ends a group: `unfinished` (left over by a group that reached its bound) go back to the
    /// front of the queue; every write of `finished` that waits is resumed with its result;
    /// then the next group (at most `limit` writes, in the order they came) is handed to its
    /// first write, or, with nobody waiting, the first caller to write next leads and lets the
    /// others of this group come.
    func finish(_ finished: [GroupedWrite], unfinished: [GroupedWrite], limit: Int) {
        record(finished, unfinished: unfinished)
        // The callers answered go first, their leader among them: while this group still counts
        // as under way, those that write again queue behind the writes already waiting, and the
        // next leader, resumed after them, finds them ready to run ahead of it.
        for write in finished {
            write.resume(.done)
        }
        let next = nextGroup(after: finished.count, limit: limit)
        // Every caller just answered may come again.
        next.first?.resume(.lead(next, siblings: finished.count))
    }

    /// Ends a group on the queue of a store whose writers take turns (see ``GroupCommitQueue``):
    /// as ``finish(_:unfinished:limit:)``, except that the next group is returned to be committed
    /// on that queue at once rather than handed to a caller. When nobody waits yet but callers
    /// were just answered, returns an empty group: its transaction begins at once and takes those
    /// callers in as they write again (``take(upTo:awaiting:)``), so that beginning it costs no
    /// time of theirs. Returns `nil` when nobody waits and nobody was answered (the transaction
    /// begun for the `expected` callers of the group before saw none of them come): no group is
    /// under way any more, and the first of those callers to write next leads and lets the others
    /// come.
    func finishTakingNext(_ finished: [GroupedWrite], unfinished: [GroupedWrite], expected: Int, limit: Int)
        -> [GroupedWrite]?
    {
        record(finished, unfinished: unfinished)
        guard !finished.isEmpty else {
            let next = nextGroup(after: expected, limit: limit)
            return next.isEmpty ? nil : next
        }
        // The callers are resumed from the cooperative pool, while the next transaction begins
        // on this queue and takes in the first of them that write again.
        Task.detached {
            for write in finished {
                write.resume(.done)
            }
        }
        return take(upTo: max(1, limit))
    }

    /// Counts a group that ended, and puts its `unfinished` writes back at the front of the queue.
    private func record(_ finished: [GroupedWrite], unfinished: [GroupedWrite]) {
        state.withLock { state in
            // A transaction begun for callers that did not come back held no group.
            if !finished.isEmpty { state.stats.groups += 1 }
            state.stats.writes += finished.count
            state.stats.largest = max(state.stats.largest, finished.count)
            state.waiting.insert(contentsOf: unfinished, at: 0)
        }
    }

    /// After a group of `count` writes: the next group (at most `limit` of the writes waiting, in
    /// the order they came), or, with nobody waiting, none, and no group is under way any more
    /// (the first caller to write next leads, the others of the group ended as its siblings).
    private func nextGroup(after count: Int, limit: Int) -> [GroupedWrite] {
        state.withLock { state -> [GroupedWrite] in
            guard !state.waiting.isEmpty else {
                state.running -= 1
                state.siblings = count - 1
                return []
            }
            let taken = min(max(1, limit), state.waiting.count)
            let next = Array(state.waiting.prefix(taken))
            state.waiting.removeFirst(taken)
            return next
        }
    }

    /// Takes up to `count` more of the writes waiting, in the order they came, for the group
    /// about to begin.
    func take(upTo count: Int) -> [GroupedWrite] {
        state.withLock { state in
            let taken = Array(state.waiting.prefix(max(0, count)))
            state.waiting.removeFirst(taken.count)
            return taken
        }
    }

    /// Takes up to `count` more of the writes waiting, as ``take(upTo:)``; when none waits yet but
    /// `awaiting` more are expected (callers just answered, about to write again), gives them a
    /// moment to come: the thread yields to theirs, for at most ``lateWriteWait``.
    func take(upTo count: Int, awaiting: Int) -> [GroupedWrite] {
        let taken = take(upTo: count)
        guard taken.isEmpty, awaiting > 0 else { return taken }
        let deadline = ContinuousClock.now + Self.lateWriteWait
        while ContinuousClock.now < deadline {
            sched_yield()
            if waitingCount > 0 { return take(upTo: count) }
        }
        return []
    }

    /// How long a group's transaction waits for the callers of the group before, when none has
    /// come yet: about what it takes a task to be resumed and write again.
    static let lateWriteWait = Duration.microseconds(50)

    /// How long a group's transaction takes new writes in, at most
    /// (``CountdownStore/groupTimeBound``, unless a test holds a transaction open for longer).
    package var timeBound: Duration {
        get { bound.withLock { $0 } }
        set { bound.withLock { $0 = newValue } }
    }
    private let bound = Locked(CountdownStore.groupTimeBound)

    /// How many writes wait for the one under way.
    package var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// What the groups committed so far held.
    package var stats: GroupStats { state.withLock { $0.stats } }
}
