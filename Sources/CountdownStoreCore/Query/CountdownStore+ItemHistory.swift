import Foundation

extension CountdownStore {
    /// The most recent events of the item under `key` (every generation), newest first: at most
    /// `limit` (1 to 10,000), found among the `window` most recent events of the store (1 to
    /// 100,000; default 10,000).
    ///
    /// The window bounds the read however many events the store keeps: an item whose events are
    /// all older than the window has none here (read `countdown_events` for its whole history).
    ///
    /// - Throws: ``CountdownError/Code/invalidKey`` for an invalid key,
    ///   ``CountdownError/Code/invalidArgument`` for a limit or window out of range.
    public func recentEvents(of key: String, limit: Int = 50, window: Int = 10_000) async throws(CountdownError)
        -> [CountdownEvent]
    {
        let key = try Validate.key(key)
        let limit = try Validate.limit(limit)
        guard (1...100_000).contains(window) else {
            throw CountdownError(.invalidArgument, "invalid window \(window): must be between 1 and 100000")
        }
        return try await reading { tx, _ in
            try tx.events(.recentOf(key: key, window: window), limit: limit).map(CountdownEvent.init)
        }
    }
}
