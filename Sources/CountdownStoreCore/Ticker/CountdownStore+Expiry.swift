import Foundation

// Recording expiries: in batches of short transactions, oldest first, for the ticker, for a
// write that finds a backlog, and for a host with no ticker (`expireDue()`).

extension CountdownStore {
    /// Between two batches of a backlog (or of a deletion): a pause in which this store writes
    /// nothing, long enough for a writer of another process that waits for the write lock
    /// (polling every millisecond, see ``DatabaseOpening``) to take it. Real time, not the
    /// store's clock: it only spaces transactions out.
    func leaveWritesToOthers() async {
        await engine.leaveWritesToOthers(for: .milliseconds(2))
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

    /// Records the expiry of at most `limit` running countdowns due at `now` on the timelines
    /// whose soonest deadline (in `timelines`) has been reached, oldest first (the most overdue
    /// on its own timeline came due earliest), each with its expiry event; returns
    /// them, and the soonest deadline on each timeline of those left due (`nil`: none left).
    static func expireDue(
        _ tx: WriteTransaction, _ now: Now, on timelines: SoonestDeadlines, limit: Int
    ) throws -> ([ItemRecord], SoonestDeadlines?) {
        var due: [ItemRecord] = []
        // Only the timelines whose soonest deadline has been reached.
        for policy in CountdownPolicy.allCases where timelines[policy] != nil {
            due += try tx.rows.dueForExpiry(policy: policy, dueBy: now.timeline(policy), limit: limit + 1)
        }
        due.sort { ($0.sortRemainingMs(at: now), $0.key) < ($1.sortRemainingMs(at: now), $1.key) }
        var left: SoonestDeadlines?
        if due.count > limit {
            var soonest = SoonestDeadlines()
            for item in due[limit...] {
                guard let deadline = item.deadlineMs else { continue }
                switch item.policy {
                case .wall: soonest.wall = min(soonest.wall ?? deadline, deadline)
                case .active: soonest.active = min(soonest.active ?? deadline, deadline)
                }
            }
            left = soonest
            due.removeSubrange(limit...)
        }
        var events: [EventRecord] = []
        events.reserveCapacity(due.count)
        for index in due.indices { events.append(expiry(&due[index], now)) }
        try tx.recordExpiries(due, events: events)
        return (due, left)
    }

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
        try translatingErrorsNow(path: path) { try engine.startUpkeep() }
    }
}
