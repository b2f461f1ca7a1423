import Foundation

// Recording due expiries for a host with no ticker (`expireDue()`), in batches of short
// transactions through the write pipeline, as the ticker does; and the ticker's upkeep.

extension CountdownStore {
    /// Records the expiry of every running countdown that has reached its deadline, oldest
    /// deadline first, each with its expiry event (with the instant it reached zero, the instant
    /// it was recorded, lateness and generation), in transactions of at most
    /// ``Configuration/expiryBatchSize`` expiries, each committed before the next.
    ///
    /// The ticker does this at each deadline; a host without one may too. A countdown that has
    /// reached zero is already `expired` for every reader before its expiry is recorded; recording
    /// it appends the event consumers receive. The items returned are held in memory: for a
    /// backlog of any size, call ``expireDue(limit:)`` until it returns none.
    ///
    /// - Returns: the items expired.
    @discardableResult
    public func expireDue() async throws(CountdownError) -> [Countdown] {
        var expired: [Countdown] = []
        while true {
            let batch = try await expireDue(limit: configuration.expiryBatchSize)
            expired += batch
            if batch.isEmpty { return expired }
            if batch.count >= configuration.expiryBatchSize { await leaveWritesToOthers() }
        }
    }

    /// Records the expiry of at most `limit` countdowns that have reached their deadline, the
    /// oldest first, in one transaction that also appends their expiry events.
    ///
    /// - Parameter limit: how many at most, 1 or more.
    /// - Returns: the items expired; empty when none was due.
    @discardableResult
    public func expireDue(limit: Int) async throws(CountdownError) -> [Countdown] {
        guard limit >= 1 else { throw CountdownError(.invalidArgument, "invalid limit \(limit): must be at least 1") }
        return try await writing(.expire, expiryLimit: limit) { _, now, expired in expired.map { $0.countdown(at: now) }
        }
    }

    /// Starts the engine's upkeep for a ticker that starts running.
    func startUpkeep() throws(CountdownError) -> (any EngineUpkeep)? {
        try translatingErrorsNow(path: path) { try capabilities.upkeep?.startUpkeep() }
    }
}
