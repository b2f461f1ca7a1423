import Foundation

// Group commit: the writes of one item (starting, pausing, cancelling…) that arrive while
// another write of this store is under way are committed together in the next transaction:
// the new keys of its starts together, every other write in a savepoint of its own. A lone
// caller runs at once, as it would without grouping: there is no timer, and nobody waits for
// company. The caller that finds nothing under way leads: it commits its own write; whoever
// arrived meanwhile is handed the next group, led by the first of them, and so on until nobody
// waits. The work stays on the callers' own tasks.

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
        _ operation: WriteOperation, notifies: Bool = true,
        _ body: @escaping @Sendable (WriteTransaction, ClocksNow) throws -> T
    ) async throws(CountdownError) -> T {
        let box = WriteValue<T>()
        let write = GroupedWrite(operation, notifies: notifies) { tx, now in
            box.value = try body(tx, now)
        }
        return try await committing(write, into: box, body)
    }

    /// ``groupedWriting(_:notifies:_:)`` for the start of a key: `start` says how the group
    /// inserts it together with the other new keys it holds.
    func groupedWriting(
        _ operation: WriteOperation, notifies: Bool = true, start: GroupedStart,
        _ body: @escaping @Sendable (WriteTransaction, ClocksNow) throws -> Countdown
    ) async throws(CountdownError) -> Countdown {
        let box = WriteValue<Countdown>()
        let write = GroupedWrite(
            operation, notifies: notifies, start: start,
            keepStarted: { item, now in box.value = item.countdown(at: now) }
        ) { tx, now in
            box.value = try body(tx, now)
        }
        return try await committing(write, into: box, body)
    }

    /// Commits `write` as its group's leader or member, and returns its value from `box`. A
    /// caller that leads a group of its own alone runs `body` straight through the write
    /// pipeline, as it would without grouping.
    private func committing<T: Sendable>(
        _ write: GroupedWrite, into box: WriteValue<T>,
        _ body: @escaping @Sendable (WriteTransaction, ClocksNow) throws -> T
    ) async throws(CountdownError) -> T {
        switch await groups.join(write) {
        case .done:
            break
        case .lead(var group, let siblings):
            // Where writers take turns, the group's transaction takes in the writes that arrive
            // while it runs (reading the clocks again for those that come after they moved on),
            // so the leader begins at once.
            let takesLate = groups.takesLateWrites && siblings > 0
            if siblings > 0, group.count < capabilities.groupedWriteLimit, !takesLate {
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
                group += groups.take(upTo: capabilities.groupedWriteLimit - group.count)
            }
            if group.count == 1 && !takesLate {
                // Alone: the write pipeline, typed, then the next group handed on.
                let result: Result<T, CountdownError>
                do {
                    result = .success(try await writing(write.operation, notifies: write.notifies, body))
                } catch {
                    result = .failure(error)
                }
                write.outcome = result.map { _ in }
                groups.finish([write], unfinished: [], limit: capabilities.groupedWriteLimit)
                return try result.get()
            }
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
        switch write.outcome {
        case .success?:
            guard let value = box.value else {
                throw CountdownError(.storageFailure, "a grouped write committed without its value")
            }
            return value
        case .failure(let error)?:
            throw error
        case nil:
            throw CountdownError(.storageFailure, "a grouped write ended without an outcome")
        }
    }

    /// Commits `group` (led by its first write) and hands on: gives every write it committed its
    /// outcome, passes the next group to its leader and wakes the rest.
    private func commit(_ group: [GroupedWrite]) async {
        _ = await commitGroup(group, takingLate: false, expected: 0)
        groups.finish(
            group.filter { $0.outcome != nil }, unfinished: group.filter { $0.outcome == nil },
            limit: capabilities.groupedWriteLimit)
    }

    /// Commits `group` as ``commit(_:)`` does, taking in the writes that come meanwhile, then
    /// the next group and the next, on the store's ``GroupCommitQueue``, while writes keep coming.
    /// A group may begin empty, expecting the `expected` callers just answered to write again.
    private func commitInTurn(_ group: [GroupedWrite], expected: Int) async {
        var (group, expected) = (group, expected)
        while true {
            let committed = await commitGroup(group, takingLate: true, expected: expected)
            guard
                let next = groups.finishTakingNext(
                    committed.filter { $0.outcome != nil }, unfinished: committed.filter { $0.outcome == nil },
                    expected: expected, limit: capabilities.groupedWriteLimit)
            else { return }
            (group, expected) = (next, committed.count)
        }
    }

    /// One write of a group in a transaction of its own, exactly as without grouping: when the
    /// group's transaction failed as a whole, so that each caller gets its own outcome.
    private func commitAlone(_ write: GroupedWrite) async {
        do {
            try await writing(write.operation, notifies: write.notifies) { tx, now in try write.body(tx, now) }
            write.outcome = .success(())
        } catch {
            write.outcome = .failure(error)
        }
    }

    /// The writes of `group` in one transaction of the write pipeline: first the new keys of its
    /// starts, inserted together (one statement where the engine can); then every other write's
    /// body, each in a savepoint, as many as the time bound lets in (the leader's always). With
    /// `takingLate`, the writes that arrived meanwhile go in next, the same way, and so on up to
    /// the group's bounds (waiting briefly for the `expected` callers of the group before);
    /// writes taken in after the clocks moved on read them again first, so that each write's
    /// instants are the ones it would have had alone. Gives every write it committed its outcome;
    /// the others wait for the next group. Returns every write it took: `group` and those taken
    /// in. With `takingLate`, `group` may be empty: the transaction begins before its writes come.
    private func commitGroup(_ group: [GroupedWrite], takingLate: Bool, expected: Int) async -> [GroupedWrite] {
        let metered = metrics.enabled
        let limit = max(1, configuration.writeExpiryBatch)
        let (groupLimit, clock) = (capabilities.groupedWriteLimit, configuration.clock)
        let taken = TakenWrites(group)
        let began = ContinuousClock.now
        let committed: CommittedWrite<(outcomes: [Result<Void, CountdownError>?], expired: Bool)>
        do {
            committed = try await runWrite(movingCheckpoint: false, expiryLimit: limit) { tx, firstNow, firstExpired in
                var now = firstNow
                var anyExpired = !firstExpired.isEmpty
                var outcomes = [Result<Void, CountdownError>?](repeating: nil, count: taken.writes.count)
                // A key asked twice goes in once: the second write runs its body, and finds the
                // key as it would alone.
                var keys = Set<String>()
                let bound = ContinuousClock.now + self.groups.timeBound
                var ran = 0
                var first = 0
                // The events of the starts inserted so far, appended together (fewer statements)
                // before anything else writes an event, so that every event keeps its place in
                // the order of the writes.
                var startEvents: [EventRecord] = []
                func appendStartEvents() throws {
                    guard !startEvents.isEmpty else { return }
                    try tx.append(all: startEvents)
                    startEvents.removeAll(keepingCapacity: true)
                }
                while true {
                    let writes = taken.writes
                    try Self.insertStarts(
                        of: writes, from: first, tx, now, keys: &keys, events: &startEvents, outcomes: &outcomes)
                    var bounded = false
                    for index in first..<writes.count where outcomes[index] == nil {
                        if index > 0, ran > 0, ContinuousClock.now >= bound {
                            bounded = true
                            break
                        }
                        ran += 1
                        try appendStartEvents()
                        do {
                            try tx.savepoint { try writes[index].body(tx, now) }
                            outcomes[index] = .success(())
                        } catch let refusal as CountdownError {
                            outcomes[index] = .failure(refusal)
                        }
                    }
                    // The writes that came meanwhile; the callers of the group before that are
                    // still on their way get a moment to come.
                    guard takingLate, !bounded, writes.count < groupLimit, ContinuousClock.now < bound else { break }
                    let more = self.groups.take(upTo: groupLimit - writes.count, awaiting: expected - writes.count)
                    guard !more.isEmpty else { break }
                    first = writes.count
                    taken.writes = writes + more
                    outcomes += [Result<Void, CountdownError>?](repeating: nil, count: more.count)
                    if now.reading != ClockReading(clock) {
                        // The clocks moved on since they were read: these writes get the instant
                        // they would get alone, as a transaction of their own would read it (with
                        // the expiries due by then recorded first).
                        try appendStartEvents()
                        let (moved, expired) = try self.advanceClocks(
                            tx, movingCheckpoint: false, expiryLimit: limit, leavingToHolder: false)
                        now = moved
                        anyExpired = anyExpired || !expired.isEmpty
                    }
                }
                try appendStartEvents()
                return (outcomes, anyExpired)
            }
        } catch {
            // The transaction failed as a whole: each write runs by itself, for its own outcome.
            for write in taken.writes { await commitAlone(write) }
            return taken.writes
        }
        var changed = committed.value.expired
        var tally = committed.tally
        let now = ContinuousClock.now
        let group = taken.writes
        for (write, outcome) in zip(group, committed.value.outcomes) {
            guard let outcome else { continue }
            write.outcome = outcome
            guard case .success = outcome else { continue }
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

    /// Inserts the new keys of the starts among `writes` from `first` on, together (one
    /// statement where the engine can), skipping keys already in `keys`; each inserted start
    /// gets its outcome and its countdown, and its event joins `events`.
    private static func insertStarts(
        of writes: [GroupedWrite], from first: Int, _ tx: WriteTransaction, _ now: ClocksNow, keys: inout Set<String>,
        events: inout [EventRecord], outcomes: inout [Result<Void, CountdownError>?]
    ) throws {
        let starts = (first..<writes.count).compactMap { index -> (Int, GroupedStart)? in
            guard let start = writes[index].start, keys.insert(start.key).inserted else { return nil }
            return (index, start)
        }
        guard !starts.isEmpty else { return }
        var items = starts.map { $0.1.item(now) }
        if let stored = tx.storedOperations {
            // The engine starts them itself, as it starts one (their events inserted already).
            let done = try stored.start(each: items, at: OperationInstant(now))
            for (position, (index, _)) in starts.enumerated() where position < done.count {
                guard let item = done[position].item, let event = storedStartEvent(done[position].outcome, item)
                else { continue }
                tx.noteStored(item, events: storedEvents(item, event: event, lateMs: done[position].lateMs, now))
                writes[index].keepStarted(item, now)
                outcomes[index] = .success(())
            }
            return
        }
        let inserted = try tx.insertNew(all: &items)
        for (position, (index, start)) in starts.enumerated() where inserted[position] {
            events.append(start.event(items[position], now))
            writes[index].keepStarted(items[position], now)
            outcomes[index] = .success(())
        }
    }
}
