import Foundation

// The write pipeline: every write of the store, a lone caller's or a group's, is one attempt of
// the same steps, written once, here:
//
//   1. begin a transaction (the engine's; or, later, one the host already holds);
//   2. move the store's clocks to now, recording the expiries that have come due
//      (`Time/CountdownStore+ClockStep.swift`, which records them through `Expiry/`);
//   3. run the write's body on the ``WriteTransaction``;
//   4. commit; or, when the body needed the checkpoint at now and the clocks could not move it
//      there past expiries still to record, roll back, record that backlog in batches of short
//      transactions, and attempt again.
//
// The engine only begins, commits and rolls back as the attempt says (``TransactionEnd``):
// nothing of the core is thrown through it.

/// Thrown inside a write whose body must change the checkpoint when the write could not move it
/// to now (expiries still to record): the pipeline rolls the attempt back, records them in
/// batches and attempts the write again. It never leaves the pipeline.
struct CheckpointBehindBacklog: Error {}

/// How one attempt of the write pipeline ended.
enum WriteAttempt<T: Sendable>: Sendable {
    /// It committed.
    case committed(CommittedWrite<T>)
    /// It was rolled back: the checkpoint could not move to now past expiries still to record.
    case behindBacklog
}

/// What a committed write hands back: the body's value, whether expiries were recorded on the
/// way, and the events it appended (`nil` when nothing is metered).
struct CommittedWrite<T: Sendable>: Sendable {
    var value: T
    var expired: Bool
    var tally: EventTally?
}

extension CountdownStore {
    /// The write pipeline: attempts the write (see
    /// ``attempt(in:movingCheckpoint:expiryLimit:leavingExpiriesToHolder:metered:_:)``) until it
    /// commits, recording the backlog in between when an attempt was left behind one.
    ///
    /// The body gets the transaction, the clocks now and the countdowns that moving the clocks
    /// expired. It may move the clocks again (``advanceClocks(_:movingCheckpoint:expiryLimit:leavingToHolder:)``)
    /// for work that comes later in the same transaction (a group's late writes).
    func runWrite<T: Sendable>(
        movingCheckpoint: Bool, expiryLimit: Int, leavingExpiriesToHolder: Bool = false,
        _ body: @escaping @Sendable (WriteTransaction, ClocksNow, [ItemRecord]) throws -> T
    ) async throws(CountdownError) -> CommittedWrite<T> {
        let metered = metrics.enabled
        while true {
            let attempt = try await translatingErrors(path: path) {
                try await underWay.run {
                    try await engine.write { rows in
                        try self.attempt(
                            in: rows, movingCheckpoint: movingCheckpoint, expiryLimit: expiryLimit,
                            leavingExpiriesToHolder: leavingExpiriesToHolder, metered: metered, body)
                    }
                }
            }
            switch attempt {
            case .committed(let committed):
                return committed
            case .behindBacklog:
                // The checkpoint could not move past expiries still to record: record them first.
                try await recordBacklog()
            }
        }
    }

    /// One attempt of a write, inside a transaction already begun (`rows`): moves the clocks to
    /// now, runs `body`, and says how the transaction ends. Synchronous, and free of how the
    /// transaction was begun, so that the same steps run in a transaction the engine began for the
    /// write or in one its host holds.
    func attempt<T: Sendable>(
        in rows: any RepositoryWriting, movingCheckpoint: Bool, expiryLimit: Int, leavingExpiriesToHolder: Bool,
        metered: Bool, _ body: (WriteTransaction, ClocksNow, [ItemRecord]) throws -> T
    ) throws -> TransactionEnd<WriteAttempt<T>> {
        // With a metrics backend, the events this attempt appends are noted.
        let tx = WriteTransaction(rows, metered: metered)
        do {
            let (now, expired) = try advanceClocks(
                tx, movingCheckpoint: movingCheckpoint, expiryLimit: expiryLimit,
                leavingToHolder: leavingExpiriesToHolder)
            let value = try body(tx, now, expired)
            return .commit(.committed(CommittedWrite(value: value, expired: !expired.isEmpty, tally: tx.tally)))
        } catch is CheckpointBehindBacklog {
            return .rollBack(.behindBacklog)
        }
    }

    /// Records the due expiries in batches of short transactions, each committed before the
    /// next, until a batch comes back short: what a write left behind a backlog waits for.
    func recordBacklog() async throws(CountdownError) {
        while try await expireDueBatch() >= max(1, configuration.expiryBatchSize) {
            await leaveWritesToOthers()
        }
    }

    /// Runs `body` in one write transaction, after moving the store's clocks to now,
    /// recording the expiry of every countdown that has come due, and checkpointing the clocks.
    ///
    /// When `body` refuses (throws a ``CountdownError``) the transaction is rolled back, except
    /// for the expiries it recorded on the way: a countdown found over stays over, with its event.
    ///
    /// Once it commits, the store's metrics count the events it appended and how long it took
    /// (under `operation`); a rolled-back transaction counts nothing.
    ///
    /// - Parameters:
    ///   - notifies: whether the write changes items or events, so that waiters (the ticker,
    ///     event streams) should look again once it commits. Recorded expiries notify whatever it says.
    ///   - operation: what the write does, for its metrics; it also says whether the write moves
    ///     the checkpoint or the lease whatever the engine (``WriteOperation/movesCheckpoint``).
    ///   - leavingExpiriesToHolder: whether the write records no expiry while a live lease is
    ///     held (by this instance or another): a named consumer's claims and acknowledgements,
    ///     which deliver what the holder's ticker records rather than doing its work.
    func writing<T: Sendable>(
        _ operation: WriteOperation, notifies: Bool = true, expiryLimit: Int? = nil,
        leavingExpiriesToHolder: Bool = false, _ body: @escaping @Sendable (WriteTransaction, ClocksNow) throws -> T
    ) async throws(CountdownError) -> T {
        try await writing(
            operation, notifies: notifies, expiryLimit: expiryLimit, leavingExpiriesToHolder: leavingExpiriesToHolder
        ) { tx, now, _ in
            try body(tx, now)
        }
    }

    /// ``writing(_:notifies:expiryLimit:leavingExpiriesToHolder:_:)`` whose body also gets the
    /// countdowns that moving the clocks expired.
    ///
    /// The write records at most `expiryLimit` due expiries, oldest first (see
    /// ``advanceClocks(_:movingCheckpoint:expiryLimit:leavingToHolder:)``); more due than that
    /// stay for the next writes (the ticker's batches). A body that must change the checkpoint
    /// itself throws ``CheckpointBehindBacklog`` when this write could not move it to now: the
    /// pipeline rolls it back, records the backlog and runs it again. A body that never refuses
    /// (`bodyMayRefuse: false`) runs without the savepoint that keeps the expiries of a refused write.
    func writing<T: Sendable>(
        _ operation: WriteOperation, notifies: Bool = true, expiryLimit: Int? = nil,
        leavingExpiriesToHolder: Bool = false, bodyMayRefuse: Bool = true,
        _ body: @escaping @Sendable (WriteTransaction, ClocksNow, [ItemRecord]) throws -> T
    ) async throws(CountdownError) -> T {
        let started = metrics.enabled ? ContinuousClock.now : nil
        let committed = try await runWrite(
            movingCheckpoint: operation.movesCheckpoint,
            expiryLimit: max(1, expiryLimit ?? configuration.writeExpiryBatch),
            leavingExpiriesToHolder: leavingExpiriesToHolder
        ) { tx, now, expired -> (Result<T, CountdownError>, groups: Set<String>) in
            // The groups of the expiries recorded: a write that notifies nothing else wrote no
            // other group's events.
            let groups = Set(expired.compactMap(\.group))
            guard !expired.isEmpty, bodyMayRefuse else { return (.success(try body(tx, now, expired)), groups) }
            // A refusal rolls back the body's writes alone: the expiries recorded stay.
            do {
                return (.success(try tx.savepoint { try body(tx, now, expired) }), groups)
            } catch let refusal as CountdownError {
                return (.failure(refusal), groups)
            }
        }
        if notifies {
            changes.bump()
        } else if committed.expired {
            changes.bump(eventsOfGroups: committed.value.groups)
        }
        if let started {
            metrics.committed(operation, duration: ContinuousClock.now - started, tally: committed.tally)
        }
        return try committed.value.0.get()
    }

    /// Records one batch of due expiries (at most `limit`, never more than
    /// ``Configuration/expiryBatchSize``), oldest first, in one short transaction; returns how
    /// many it recorded.
    func expireDueBatch(limit: Int? = nil) async throws(CountdownError) -> Int {
        let limit = min(max(1, limit ?? configuration.expiryBatchSize), max(1, configuration.expiryBatchSize))
        return try await writing(.expire, notifies: false, expiryLimit: limit, bodyMayRefuse: false) { _, _, expired in
            expired.count
        }
    }

    /// Between two batches of a backlog (or of a deletion): a pause in which this store writes
    /// nothing, long enough for a writer of another process that waits for the write lock
    /// (polling every millisecond, see ``DatabaseOpening``) to take it. Real time, not the
    /// store's clock: it only spaces transactions out.
    func leaveWritesToOthers() async {
        let pause = Duration.milliseconds(2)
        if let upkeep = capabilities.upkeep {
            await upkeep.leaveWritesToOthers(for: pause)
        } else {
            try? await Task.sleep(for: pause)
        }
    }
}
