import Foundation

// Every operation of the store is one of these transactions: a write moves the store's clocks
// to now first (Time/CountdownStore+ClockStep.swift) and records what has come due; a read
// extrapolates the clocks to now. The engine runs the transaction; this is all the core asks of it.

extension CountdownStore {
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
        leavingExpiriesToHolder: Bool = false, _ body: @escaping @Sendable (WriteTransaction, Now) throws -> T
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
    /// ``advanceClocks(_:movingCheckpoint:expiryLimit:)``); more due than that stay for the next
    /// writes (the ticker's batches). A body that must change the checkpoint itself throws
    /// ``CheckpointBehindBacklog`` when this write could not move it to now: the write is rolled
    /// back, the backlog recorded in batches of short transactions, and the write tried again.
    /// A body that never refuses (`bodyMayRefuse: false`) runs without the savepoint that keeps
    /// the expiries of a refused write.
    func writing<T: Sendable>(
        _ operation: WriteOperation, notifies: Bool = true, expiryLimit: Int? = nil,
        leavingExpiriesToHolder: Bool = false, bodyMayRefuse: Bool = true,
        _ body: @escaping @Sendable (WriteTransaction, Now, [ItemRecord]) throws -> T
    ) async throws(CountdownError) -> T {
        let limit = max(1, expiryLimit ?? configuration.writeExpiryBatch)
        let metered = metrics.enabled
        while true {
            let outcome: (result: Result<T, CountdownError>, expired: Bool, tally: EventTally?)?
            let started = metered ? ContinuousClock.now : nil
            outcome = try await translatingErrors(path: path) {
                do {
                    return try await using.run {
                        try await engine.write { engineTransaction in
                            // With a metrics backend, the events this attempt appends are noted.
                            let tx = WriteTransaction(engineTransaction, metered: metered)
                            let (now, expired) = try self.advanceClocks(
                                tx, movingCheckpoint: operation.movesCheckpoint, expiryLimit: limit,
                                leavingToHolder: leavingExpiriesToHolder)
                            guard !expired.isEmpty, bodyMayRefuse else {
                                let result = try body(tx, now, expired)
                                return (.success(result), !expired.isEmpty, tx.tally)
                            }
                            do {
                                let result = try tx.savepoint { try body(tx, now, expired) }
                                return (.success(result), true, tx.tally)
                            } catch let refusal as CountdownError {
                                return (.failure(refusal), true, tx.tally)
                            }
                        }
                    }
                } catch is CheckpointBehindBacklog {
                    return nil
                }
            }
            guard let outcome else {
                // The checkpoint could not move past expiries still to record: record them first.
                while try await expireDueBatch() >= max(1, configuration.expiryBatchSize) {
                    await leaveWritesToOthers()
                }
                continue
            }
            if notifies || outcome.expired { changes.bump() }
            if let started {
                metrics.committed(operation, duration: ContinuousClock.now - started, tally: outcome.tally)
            }
            return try outcome.result.get()
        }
    }

    /// Runs `body` in one read transaction with the store's clocks extrapolated to now.
    ///
    /// The body also learns whether any running countdown has come due (expired for every
    /// reader, not recorded yet), from the soonest deadlines the clock query reads anyway.
    func reading<T: Sendable>(
        events: Bool = false, _ body: @escaping @Sendable (any RepositoryReading, Now) throws -> T
    ) async throws(CountdownError) -> T {
        try await reading(events: events) { tx, now, _ in try body(tx, now) }
    }

    /// ``reading(_:)`` whose body also gets the soonest deadlines of running countdowns. With
    /// `events`, the body reads events by ID (see ``CountdownRepository/readEvents(_:)``).
    func reading<T: Sendable>(
        events: Bool = false, _ body: @escaping @Sendable (any RepositoryReading, Now, SoonestDeadlines) throws -> T
    ) async throws(CountdownError) -> T {
        try await translatingErrors(path: path) {
            try await using.run {
                let read = { @Sendable (tx: any RepositoryReading) throws -> T in
                    let (extrapolation, checkpoint, lease, soonest, _) = try self.extrapolate(tx)
                    self.remember(checkpoint, leaseExpiry: lease.expiresAtMs)
                    let now = Now(self.raiseFloor(extrapolation.time), base: checkpoint, ticking: extrapolation.ticking)
                    return try body(tx, now, soonest)
                }
                return try await events ? engine.readEvents(read) : engine.read(read)
            }
        }
    }

    /// The boot-clock instant at which the next running countdown comes due, from the soonest
    /// deadlines (index lookups); now when one has come due and is not recorded yet; `nil` when
    /// none will come due while the host stays as it is (an `active` countdown never comes due
    /// while suspended or while nobody holds the lease).
    func nextDueBoot() async throws(CountdownError) -> Int64? {
        try await translatingErrors(path: path) {
            try await using.run {
                try await engine.read { tx in
                    let (extrapolation, checkpoint, lease, soonest, reading) = try self.extrapolate(tx)
                    self.remember(checkpoint, leaseExpiry: lease.expiresAtMs)
                    let time = self.raiseFloor(extrapolation.time)
                    var policies: [CountdownPolicy] = [.wall]
                    if extrapolation.ticking { policies.append(.active) }
                    return policies.compactMap { policy in
                        soonest[policy].map { reading.boot + max(0, $0 - time.timeline(policy)) }
                    }.min()
                }
            }
        }
    }

    /// A number that changes whenever another connection (another process) commits.
    func foreignChangeToken() async throws(CountdownError) -> Int {
        try await translatingErrors(path: path) { try await using.run { try await engine.foreignChangeToken() } }
    }
}
