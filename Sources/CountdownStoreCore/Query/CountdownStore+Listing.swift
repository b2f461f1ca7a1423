import Foundation

/// Which items ``CountdownStore/list(_:group:limit:)`` returns.
public enum StateFilter: String, Sendable, Hashable, Codable, CaseIterable {
    /// Running and paused, soonest to expire first (stopwatches last).
    case active
    /// Running only, soonest first.
    case running
    /// Paused only, least remaining first.
    case paused
    /// Expired (reached zero, recorded or not), most recent first.
    case expired
    /// Cancelled, most recent first.
    case cancelled
    /// Everything: active ones first, soonest first, then ended ones, most recent first.
    case all
}

extension CountdownStore {
    /// Items in the states `filter` names, optionally of one group, at most `limit` (1 to 10,000;
    /// default 100), in the filter's order: the first page of ``list(_:group:limit:after:)``.
    ///
    /// A countdown whose remaining time has reached zero is expired from that instant, whether
    /// or not its expiry is recorded yet.
    public func list(_ filter: StateFilter = .active, group: String? = nil, limit: Int = 100)
        async throws(CountdownError) -> [Countdown]
    {
        try await list(filter, group: group, limit: limit, after: nil).items
    }

    /// One page of the items in the states `filter` names, optionally of one group: at most
    /// `limit` (1 to 10,000) from `cursor` on, and where the next page begins.
    ///
    /// Orders: active items soonest to expire first (stopwatches last, by key); ended ones
    /// (expired, cancelled) most recent first, by the instant they ended; `all` lists the active
    /// ones, then the ended ones. Each page is one read transaction served from indexes, so the
    /// cost of a page grows with `limit`, and walking every page of a large store holds one page
    /// in memory at a time:
    ///
    /// ```swift
    /// var cursor: ListCursor?
    /// repeat {
    ///     let page = try await store.list(.all, limit: 1000, after: cursor)
    ///     for item in page.items { print(item.key) }
    ///     cursor = page.next
    /// } while cursor != nil
    /// ```
    ///
    /// - Throws: ``CountdownError/Code/invalidArgument`` for a limit out of range or a cursor
    ///   from another filter or group.
    public func list(
        _ filter: StateFilter, group: String? = nil, limit: Int = 100, after cursor: ListCursor?
    ) async throws(CountdownError) -> CountdownPage {
        let group = try Validate.group(group)
        let limit = try Validate.limit(limit)
        if let cursor, cursor.filter != filter || cursor.group != group {
            throw CountdownError(
                .invalidArgument,
                "invalid cursor: it continues a list of \(cursor.filter.rawValue) "
                    + "items\(cursor.group.map { " in group \(quoted($0))" } ?? ""), not of "
                    + "\(filter.rawValue)\(group.map { " in group \(quoted($0))" } ?? "")"
            )
        }
        return try await reading { tx, now in
            let page = try Self.listPage(tx, now, filter: filter, group: group, limit: limit, after: cursor)
            return CountdownPage(items: page.items.map { $0.countdown(at: now) }, next: page.next)
        }
    }

    /// The most recent events, newest first, optionally only of some kinds.
    public func recentEvents(kinds: [CountdownEvent.Kind]? = nil, limit: Int = 20) async throws(CountdownError)
        -> [CountdownEvent]
    {
        let limit = try Validate.limit(limit)
        let names = kinds?.map(\.rawValue)
        return try await reading { tx, _ in
            try tx.events(.recent(kinds: names), limit: limit).map(CountdownEvent.init)
        }
    }
}
