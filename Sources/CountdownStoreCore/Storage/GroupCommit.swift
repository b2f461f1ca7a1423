import Foundation

// Group commit: the writes of one item (starting, pausing, cancelling…) that arrive while
// another write of this store is under way are committed together in the next transaction:
// the new keys of its starts together, every other write in a savepoint of its own. A lone
// caller runs at once, as it would without grouping: there is no timer, and nobody waits for
// company. The caller that finds nothing under way leads: it commits its own write; whoever
// arrived meanwhile is handed the next group, led by the first of them, and so on until nobody
// waits. The work stays on the callers' own tasks.

/// One write waiting to be committed with others: its body, and where its caller waits.
final class GroupedWrite: @unchecked Sendable {
    // `@unchecked Sendable`: `result` and `continuation` are set by the task that leads the group
    // holding this write, before it resumes the caller, which reads them only after it is resumed
    // (the lock of ``WriteGroups`` orders the rest).
    let operation: WriteOperation
    let notifies: Bool
    /// The write's own work, in the group's transaction.
    let body: @Sendable (WriteTransaction, Now) throws -> any Sendable
    /// When the caller asked: its duration counts from here (the wait included).
    let asked = ContinuousClock.now
    /// For the start of a key, how a group may insert it with the group's other new keys.
    let start: GroupedStart?
    var result: Result<any Sendable, CountdownError>?
    /// Where the caller waits: queued for a group, or for the group it leads to end.
    var continuation: CheckedContinuation<GroupRole, Never>?

    /// Resumes the caller, if it waits (once: the continuation is used up).
    func resume(_ role: GroupRole) {
        // Read under no lock: only the task that leads the group holding this write reaches it,
        // and the continuation was set before the write was queued or its group's task began.
        let continuation = self.continuation
        self.continuation = nil
        continuation?.resume(returning: role)
    }

    init(
        _ operation: WriteOperation, notifies: Bool, start: GroupedStart?,
        _ body: @escaping @Sendable (WriteTransaction, Now) throws -> any Sendable
    ) {
        self.operation = operation
        self.notifies = notifies
        self.start = start
        self.body = body
    }
}

/// The start of a key as a group inserts it together with its other new keys (one statement
/// where the engine can): the item at the group's instant, and its event. A key that turns out to
/// exist runs the write's own body instead, which decides as it would alone (refuse, keep, replace).
struct GroupedStart: Sendable {
    let key: String
    let item: @Sendable (Now) -> ItemRecord
    let event: @Sendable (ItemRecord, Now) -> EventRecord
}

/// What a waiting caller is resumed for.
enum GroupRole: Sendable {
    /// Its write has its result.
    case done
    /// It leads these writes (its own first) in the next transaction; `siblings` callers of the
    /// group before were just answered, are not in this group, and may be about to write again.
    case lead([GroupedWrite], siblings: Int)
}

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

/// A serial queue of its own for the transactions of a store's groups, where writers take turns:
/// a group's transaction begins at once, on a thread of its own, and takes in the callers of the
/// group before as they write again, instead of beginning only after every one of them has run
/// on the cooperative pool ahead of it.
final class GroupCommitQueue: Sendable {
    let queue = DispatchQueue(label: "CountdownStore.group-commit", qos: .userInitiated)
}

@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
extension GroupCommitQueue: TaskExecutor {
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}

/// The writes a group's transaction has taken so far: its own, then those it took in while it ran.
private final class TakenWrites: @unchecked Sendable {
    // `@unchecked Sendable`: read and changed by the group's task and, inside its transaction,
    // by the transaction's body, which runs while that task waits for it; never at once.
    var writes: [GroupedWrite]

    init(_ writes: [GroupedWrite]) {
        self.writes = writes
    }
}

extension CountdownStore {
    /// How long a group's transaction takes new writes in, at most: what is left waits for the
    /// next group, so that no transaction grows with the load and other processes get between.
    static let groupTimeBound = Duration.milliseconds(50)

    /// Runs `body` as ``writing(_:notifies:expiryLimit:leavingExpiriesToHolder:_:)``
    /// would, committed together with the writes of other callers that arrive while one is under
    /// way (group commit; see ``WriteGroups``).
    ///
    /// The new keys of a group's starts go in together (`start` says how); every other write runs
    /// in a savepoint of its own: a refusal fails that caller alone and leaves nothing of its
    /// write, and every other caller gets exactly what it would have got alone. Every caller gets
    /// its result once the group's transaction has committed. When the transaction fails as a
    /// whole (the database, not a refusal), each write of the group runs again in a transaction
    /// of its own, so that each caller gets its own outcome.
    func groupedWriting<T: Sendable>(
        _ operation: WriteOperation, notifies: Bool = true, start: GroupedStart? = nil,
        _ body: @escaping @Sendable (WriteTransaction, Now) throws -> T
    ) async throws(CountdownError) -> T {
        let write = GroupedWrite(operation, notifies: notifies, start: start) { tx, now in try body(tx, now) }
        switch await groups.join(write) {
        case .done:
            break
        case .lead(var group, let siblings):
            // Where writers take turns, the group's transaction takes in the writes that arrive
            // while it runs (reading the clocks again for those that come after they moved on),
            // so the leader begins at once.
            let takesLate = groups.takesLateWrites && siblings > 0
            if siblings > 0, group.count < engine.groupedWriteLimit, !takesLate {
                // A server's commit delay for its commit siblings, without a timer: the callers
                // the last group just answered are running again, and most are about to write.
                // Let them come (each yield lets the tasks ready to run go first; at most 8, and
                // no more once nobody new came) and take them into this group rather than leave
                // them a group of their own, one commit each. A lone caller never waits here.
                var seen = -1
                for _ in 0..<8 {
                    let waiting = groups.waitingCount
                    if waiting >= siblings || waiting == seen { break }
                    seen = waiting
                    await Task.yield()
                }
                group += groups.take(upTo: engine.groupedWriteLimit - group.count)
            }
            if group.count == 1 && !takesLate {
                await commit(group)
            } else {
                // In a task of its own, which the leader's cancellation does not reach: a request
                // handler whose client went away must not fail the other callers' writes.
                // Its leader waits to be resumed with the others it led, not for the task to end:
                // resumed in the same turn, it comes back in time to join the next group.
                let (store, committed) = (self, group)
                _ = await withCheckedContinuation { (continuation: CheckedContinuation<GroupRole, Never>) in
                    write.continuation = continuation
                    if takesLate, #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *) {
                        Task(executorPreference: groups.committer) {
                            await store.commitInTurn(committed, expected: siblings + 1)
                        }
                    } else if takesLate {
                        Task { await store.commitInTurn(committed, expected: siblings + 1) }
                    } else {
                        Task { await store.commit(committed) }
                    }
                }
            }
        }
        guard let result = write.result else {
            throw CountdownError(.storageFailure, "a grouped write ended without a result")
        }
        switch result {
        case .success(let value):
            guard let value = value as? T else {
                throw CountdownError(.storageFailure, "a grouped write returned \(type(of: value))")
            }
            return value
        case .failure(let error):
            throw error
        }
    }

    /// Commits `group` (led by its first write) and hands on: sets the result of every write it
    /// committed, passes the next group to its leader and wakes the rest.
    private func commit(_ group: [GroupedWrite]) async {
        if group.count == 1 {
            await alone(group[0])
        } else {
            _ = await together(group, takingLate: false, expected: 0)
        }
        groups.finish(
            group.filter { $0.result != nil }, unfinished: group.filter { $0.result == nil },
            limit: engine.groupedWriteLimit)
    }

    /// Commits `group` as ``commit(_:)`` does, taking in the writes that come meanwhile, then
    /// the next group and the next, on the store's ``GroupCommitQueue``, while writes keep coming.
    /// A group may begin empty, expecting the `expected` callers just answered to write again.
    private func commitInTurn(_ group: [GroupedWrite], expected: Int) async {
        var (group, expected) = (group, expected)
        while true {
            let committed = await together(group, takingLate: true, expected: expected)
            guard
                let next = groups.finishTakingNext(
                    committed.filter { $0.result != nil }, unfinished: committed.filter { $0.result == nil },
                    expected: expected, limit: engine.groupedWriteLimit)
            else { return }
            (group, expected) = (next, committed.count)
        }
    }

    /// One write in a transaction of its own, exactly as without grouping.
    private func alone(_ write: GroupedWrite) async {
        do {
            let value = try await writing(write.operation, notifies: write.notifies) { tx, now in
                try write.body(tx, now)
            }
            write.result = .success(value)
        } catch {
            write.result = .failure(error)
        }
    }

    /// The writes of `group` in one transaction: first the new keys of its starts, inserted
    /// together (one statement where the engine can); then every other write's body, each in a
    /// savepoint, as many as the time bound lets in (the leader's always). With `takingLate`, the
    /// writes that arrived meanwhile go in next, the same way, and so on up to the group's bounds
    /// (waiting briefly for the `expected` callers of the group before); writes taken in after the
    /// clocks moved on read them again first, so that each write's instants are the ones it
    /// would have had alone. Sets the result of every write it committed (or gave its outcome);
    /// the others wait for the next group. Returns every write it took: `group` and those taken in.
    /// With `takingLate`, `group` may be empty: the transaction begins before its writes come.
    private func together(_ group: [GroupedWrite], takingLate: Bool, expected: Int) async -> [GroupedWrite] {
        let metered = metrics.enabled
        let limit = max(1, configuration.writeExpiryBatch)
        let (groupLimit, clock) = (engine.groupedWriteLimit, configuration.clock)
        let taken = TakenWrites(group)
        let began = ContinuousClock.now
        while true {
            let attempt: (results: [Result<any Sendable, CountdownError>?], expired: Bool, tally: EventTally?)?
            do {
                attempt = try await translatingErrors(path: path) {
                    do {
                        return try await using.run {
                            try await engine.write { engineTransaction in
                                // With a metrics backend, the events this attempt appends are noted.
                                let tx = WriteTransaction(engineTransaction, metered: metered)
                                var (now, expired) = try self.advanceClocks(
                                    tx, movingCheckpoint: false, expiryLimit: limit, leavingToHolder: false)
                                var anyExpired = !expired.isEmpty
                                var results = [Result<any Sendable, CountdownError>?](
                                    repeating: nil, count: taken.writes.count)
                                // A key asked twice goes in once: the second write runs its body, and
                                // finds the key as it would alone.
                                var keys = Set<String>()
                                let bound = ContinuousClock.now + self.groups.timeBound
                                var ran = 0
                                var first = 0
                                // The events of the starts inserted so far, appended together (fewer
                                // statements) before anything else writes an event, so that every
                                // event keeps its place in the order of the writes.
                                var startEvents: [EventRecord] = []
                                func appendStartEvents() throws {
                                    guard !startEvents.isEmpty else { return }
                                    try tx.append(all: startEvents)
                                    startEvents.removeAll(keepingCapacity: true)
                                }
                                while true {
                                    let writes = taken.writes
                                    // The new keys of these writes, together.
                                    let starts = (first..<writes.count).compactMap { index -> (Int, GroupedStart)? in
                                        guard let start = writes[index].start, keys.insert(start.key).inserted else {
                                            return nil
                                        }
                                        return (index, start)
                                    }
                                    if !starts.isEmpty {
                                        var items = starts.map { $0.1.item(now) }
                                        let inserted = try tx.insertNew(all: &items)
                                        for (position, (index, start)) in starts.enumerated() where inserted[position] {
                                            startEvents.append(start.event(items[position], now))
                                            results[index] = .success(items[position].countdown(at: now))
                                        }
                                    }
                                    var bounded = false
                                    for index in first..<writes.count where results[index] == nil {
                                        if index > 0, ran > 0, ContinuousClock.now >= bound {
                                            bounded = true
                                            break
                                        }
                                        ran += 1
                                        try appendStartEvents()
                                        do {
                                            results[index] = .success(
                                                try tx.savepoint { try writes[index].body(tx, now) })
                                        } catch let refusal as CountdownError {
                                            results[index] = .failure(refusal)
                                        }
                                    }
                                    // The writes that came meanwhile; the callers of the group before
                                    // that are still on their way get a moment to come.
                                    guard takingLate, !bounded, writes.count < groupLimit, ContinuousClock.now < bound
                                    else { break }
                                    let more = self.groups.take(
                                        upTo: groupLimit - writes.count, awaiting: expected - writes.count)
                                    guard !more.isEmpty else { break }
                                    first = writes.count
                                    taken.writes = writes + more
                                    results += [Result<any Sendable, CountdownError>?](
                                        repeating: nil, count: more.count)
                                    if now.reading != ClockReading(clock) {
                                        // The clocks moved on since they were read: these writes get the
                                        // instant they would get alone, as a transaction of their own
                                        // would read it (with the expiries due by then recorded first).
                                        try appendStartEvents()
                                        (now, expired) = try self.advanceClocks(
                                            tx, movingCheckpoint: false, expiryLimit: limit, leavingToHolder: false)
                                        anyExpired = anyExpired || !expired.isEmpty
                                    }
                                }
                                try appendStartEvents()
                                return (results, anyExpired, tx.tally)
                            }
                        }
                    } catch is CheckpointBehindBacklog {
                        return nil
                    }
                }
            } catch {
                // The transaction failed as a whole: each write runs by itself, for its own outcome.
                for write in taken.writes { await alone(write) }
                return taken.writes
            }
            guard let attempt else {
                // The clocks could not move past expiries still to record: record them first.
                do {
                    while try await expireDueBatch() >= max(1, configuration.expiryBatchSize) {
                        await leaveWritesToOthers()
                    }
                } catch {
                    for write in taken.writes { await alone(write) }
                    return taken.writes
                }
                continue
            }
            var changed = attempt.expired
            var tally = attempt.tally
            let now = ContinuousClock.now
            let group = taken.writes
            for (write, result) in zip(group, attempt.results) {
                guard let result else { continue }
                write.result = result
                guard case .success = result else { continue }
                changed = changed || write.notifies
                if metered {
                    // The events the transaction appended are counted once, with its first write.
                    metrics.committed(write.operation, duration: now - write.asked, tally: tally)
                    tally = nil
                }
            }
            if metered, let tally, !tally.entries.isEmpty {
                // Every write refused, or none came, and the expiries the transaction recorded
                // still count.
                if let first = group.first {
                    metrics.committed(first.operation, duration: now - first.asked, tally: tally)
                } else {
                    metrics.committed(.expire, duration: now - began, tally: tally)
                }
            }
            if changed { changes.bump() }
            return group
        }
    }
}
