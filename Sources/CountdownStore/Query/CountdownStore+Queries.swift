import Foundation

/// Where the next page of ``CountdownStore/active(group:limit:after:)`` begins.
///
/// It remembers the instant the first page was computed at, so the order stays the same
/// across pages even as time passes; the figures on every page are fresh.
public struct ActiveCursor: Sendable, Hashable, Codable {
    /// The store clocks the order was computed at.
    public var time: StoreTime
    /// The last item of the previous page: its remaining time (nil for a stopwatch) and key.
    public var remainingMs: Int64?
    /// The last key of the previous page.
    public var key: String
}

/// One page of active items, soonest to expire first.
public struct ActivePage: Sendable, Hashable {
    /// The items of this page: countdowns by remaining time, then stopwatches by key.
    public var items: [Countdown]
    /// Where the next page begins, or `nil` when this page is the last.
    public var next: ActiveCursor?
}

/// How many items are in each state, overall and per group.
public struct CountdownCounts: Sendable, Hashable {
    /// One state and group with its count; `group` is `nil` for items without a group.
    public struct Entry: Sendable, Hashable {
        /// The state counted.
        public var state: CountdownState
        /// The group counted, `nil` for items without one.
        public var group: String?
        /// How many items.
        public var count: Int
    }

    /// Every non-empty state and group.
    public var entries: [Entry]

    /// How many items are in `state` (in every group, or in `group` when given).
    public func count(_ state: CountdownState, group: String? = nil) -> Int {
        entries.filter { $0.state == state && (group == nil || $0.group == group) }.reduce(0) { $0 + $1.count }
    }

    /// How many items there are in all.
    public var total: Int { entries.reduce(0) { $0 + $1.count } }
}

extension CountdownStore {
    /// The item under `key`, with elapsed and remaining time now; `nil` when there is none.
    ///
    /// One read transaction: the clock row and one lookup in the key's unique index. The figures
    /// are computed at the store's clocks at that instant (``Countdown/computedAt``).
    public func countdown(_ key: String) async throws(CountdownError) -> Countdown? {
        let key = try Validate.key(key)
        return try await reading { tx, time in try tx.item(key: key)?.countdown(at: time) }
    }

    /// Running and paused items, soonest to expire first (stopwatches last, by key), a page at a time.
    ///
    /// Served from indexes: the cost grows with `limit`, not with the number of items stored.
    public func active(
        group: String? = nil, limit: Int = 100, after cursor: ActiveCursor? = nil
    ) async throws(CountdownError) -> ActivePage {
        let group = try Validate.group(group)
        let limit = try Validate.limit(limit)
        return try await reading { tx, now in
            let orderTime = cursor?.time ?? now
            var ranked: [(remaining: Int64, item: ItemRecord)] = []
            let inStopwatches = cursor != nil && cursor?.remainingMs == nil
            if !inStopwatches {
                for policy in CountdownPolicy.allCases {
                    let timeline = orderTime.timeline(policy)
                    let after = cursor.flatMap { c in c.remainingMs.map { SortPosition(value: $0 + timeline, key: c.key) } }
                    ranked += try tx.running(policy: policy, group: group, after: after, limit: limit)
                        .map { ($0.sortRemainingMs(at: orderTime), $0) }
                }
                let after = cursor.flatMap { c in c.remainingMs.map { SortPosition(value: $0, key: c.key) } }
                ranked += try tx.paused(group: group, after: after, limit: limit).map { ($0.sortRemainingMs(at: orderTime), $0) }
                ranked.sort { ($0.remaining, $0.item.key) < ($1.remaining, $1.item.key) }
                ranked = Array(ranked.prefix(limit))
            }
            var page = ranked.map { (remaining: Optional($0.remaining), item: $0.item) }
            if page.count < limit {
                let afterKey = inStopwatches ? cursor?.key : nil
                page += try tx.activeStopwatches(group: group, afterKey: afterKey, limit: limit - page.count)
                    .map { (remaining: nil, item: $0) }
            }
            let next = page.count == limit ? page.last.map { ActiveCursor(time: orderTime, remainingMs: $0.remaining, key: $0.item.key) } : nil
            return ActivePage(items: page.map { $0.item.countdown(at: now) }, next: next)
        }
    }

    /// Paused items, least remaining time first.
    ///
    /// Served from an index of paused items in that order: the cost grows with `limit`.
    public func paused(group: String? = nil, limit: Int = 100) async throws(CountdownError) -> [Countdown] {
        let group = try Validate.group(group)
        let limit = try Validate.limit(limit)
        return try await reading { tx, time in
            let countdowns = try tx.paused(group: group, after: nil, limit: limit)
            let stopwatches = try tx.activeStopwatches(group: group, afterKey: nil, limit: limit)
                .filter { $0.state == .paused }
            return (countdowns + stopwatches).prefix(limit).map { $0.countdown(at: time) }
        }
    }

    /// Expired items, newest first, optionally only those that expired at or after `since`.
    ///
    /// `since` is an instant on the store wall clock. Served from an index of expiry instants
    /// (per group when `group` is given): the cost grows with `limit`.
    public func expired(
        since: Date? = nil, group: String? = nil, limit: Int = 100
    ) async throws(CountdownError) -> [Countdown] {
        let group = try Validate.group(group)
        let limit = try Validate.limit(limit)
        let sinceMs = since?.millisecondsSince1970  // saturates: a far-off instant simply matches nothing or everything
        return try await reading { tx, time in
            try tx.expired(sinceMs: sinceMs, group: group, limit: limit).map { $0.countdown(at: time) }
        }
    }

    /// Running countdowns that reach zero within `window` from now (due ones included), soonest first.
    ///
    /// `window` is measured on each countdown's own timeline (``StoreTime/timeline(_:)``): an
    /// `active` countdown counts only while a ticker runs, so it may reach zero later than
    /// `window` of wall time. Served from the deadline indexes, one range per policy.
    public func expiring(
        within window: Duration, group: String? = nil, limit: Int = 100
    ) async throws(CountdownError) -> [Countdown] {
        let windowMs = try Validate.duration(window, what: "window")
        let group = try Validate.group(group)
        let limit = try Validate.limit(limit)
        return try await reading { tx, time in
            var items: [ItemRecord] = []
            for policy in CountdownPolicy.allCases {
                items += try tx.running(policy: policy, dueBy: time.timeline(policy) + windowMs, group: group, limit: limit)
            }
            return items.sorted { ($0.sortRemainingMs(at: time), $0.key) < ($1.sortRemainingMs(at: time), $1.key) }
                .prefix(limit).map { $0.countdown(at: time) }
        }
    }

    /// The running countdown that reaches zero first, from an index lookup; `nil` when none runs.
    ///
    /// Two index lookups, one per policy: microseconds, whatever the number of items stored.
    public func nextDeadline() async throws(CountdownError) -> Countdown? {
        try await reading { tx, time in
            try CountdownPolicy.allCases.compactMap { try tx.nextDeadline(policy: $0) }
                .min { ($0.sortRemainingMs(at: time), $0.key) < ($1.sortRemainingMs(at: time), $1.key) }?
                .countdown(at: time)
        }
    }

    /// How many items are in each state and group.
    ///
    /// One `GROUP BY` query: it reads an index entry per stored item, so it costs in proportion
    /// to the number of items stored.
    public func counts() async throws(CountdownError) -> CountdownCounts {
        try await reading { tx, _ in
            CountdownCounts(entries: try tx.counts().map { .init(state: $0.state, group: $0.group, count: $0.count) })
        }
    }
}
