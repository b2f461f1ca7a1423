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
    /// are computed at the store's clocks at that instant (``Countdown/computedAt``); a countdown
    /// whose remaining time has reached zero is `expired` from that instant, recorded or not.
    public func countdown(_ key: String) async throws(CountdownError) -> Countdown? {
        let key = try Validate.key(key)
        return try await reading { tx, now in try tx.item(key: key)?.countdown(at: now) }
    }

    /// Running and paused items, soonest to expire first (stopwatches last, by key), a page at a time.
    ///
    /// A countdown whose remaining time has reached zero is expired, not active, from that
    /// instant, whether or not its expiry is recorded yet. Served from indexes: the cost grows
    /// with `limit`, not with the number of items stored.
    public func active(
        group: String? = nil, limit: Int = 100, after cursor: ActiveCursor? = nil
    ) async throws(CountdownError) -> ActivePage {
        let group = try Validate.group(group)
        let limit = try Validate.limit(limit)
        return try await reading { tx, now in
            let slice = try Self.activeSlice(
                tx, now, group: group, states: [.running, .paused], limit: limit, after: cursor)
            return ActivePage(items: slice.items.map { $0.countdown(at: now) }, next: slice.next)
        }
    }

    /// Paused items, least remaining time first (stopwatches last, by key).
    ///
    /// Served from an index of paused items in that order: the cost grows with `limit`.
    public func paused(group: String? = nil, limit: Int = 100) async throws(CountdownError) -> [Countdown] {
        let group = try Validate.group(group)
        let limit = try Validate.limit(limit)
        return try await reading { tx, now in
            try Self.activeSlice(tx, now, group: group, states: [.paused], limit: limit, after: nil).items
                .map { $0.countdown(at: now) }
        }
    }

    /// Expired items, newest first, optionally only those that expired at or after `since`.
    ///
    /// An item's expiry instant is when its remaining time reached zero, on the store wall clock.
    /// Countdowns that have reached zero and whose expiry is not recorded yet are included (they
    /// are the newest). `since` is an instant on the store wall clock. Served from an index of
    /// expiry instants (per group when `group` is given) and the deadline indexes: the cost grows
    /// with `limit`.
    public func expired(
        since: Date? = nil, group: String? = nil, limit: Int = 100
    ) async throws(CountdownError) -> [Countdown] {
        let group = try Validate.group(group)
        let limit = try Validate.limit(limit)
        let sinceMs = since?.millisecondsSince1970  // saturates: a far-off instant simply matches nothing or everything
        return try await reading { tx, now in
            try Self.endedSlice(tx, now, group: group, states: [.expired], sinceMs: sinceMs, limit: limit, after: nil)
                .items.map { $0.countdown(at: now) }
        }
    }

    /// Running countdowns that reach zero within `window` from now, soonest first.
    ///
    /// Countdowns already at zero are expired and not listed. `window` is measured on each
    /// countdown's own timeline (``StoreTime/timeline(_:)``): an `active` countdown counts only
    /// while a ticker runs, so it may reach zero later than `window` of wall time. Served from
    /// the deadline indexes, one range per policy.
    public func expiring(
        within window: Duration, group: String? = nil, limit: Int = 100
    ) async throws(CountdownError) -> [Countdown] {
        let windowMs = try Validate.duration(window, what: "window")
        let group = try Validate.group(group)
        let limit = try Validate.limit(limit)
        return try await reading { tx, now in
            var items: [ItemRecord] = []
            for policy in CountdownPolicy.allCases {
                let timeline = now.timeline(policy)
                items += try tx.running(policy: policy, group: group, after: nil, notDueBy: timeline, limit: limit)
                    .prefix { ($0.deadlineMs ?? .max) <= timeline + windowMs }
            }
            return items.sorted { ($0.sortRemainingMs(at: now), $0.key) < ($1.sortRemainingMs(at: now), $1.key) }
                .prefix(limit).map { $0.countdown(at: now) }
        }
    }

    /// The running countdown that reaches zero first, from an index lookup; `nil` when none runs.
    ///
    /// Countdowns already at zero are expired and not considered. Two index lookups, one per
    /// policy: microseconds, whatever the number of items stored.
    public func nextDeadline() async throws(CountdownError) -> Countdown? {
        try await reading { tx, now in
            try CountdownPolicy.allCases.compactMap { policy in
                try tx.running(policy: policy, group: nil, after: nil, notDueBy: now.timeline(policy), limit: 1).first
            }
            .min { ($0.sortRemainingMs(at: now), $0.key) < ($1.sortRemainingMs(at: now), $1.key) }?
            .countdown(at: now)
        }
    }

    /// How many items are in each state and group.
    ///
    /// One `GROUP BY` query: it reads an index entry per stored item, so it costs in proportion
    /// to the number of items stored. Countdowns that have reached zero count as expired.
    public func counts() async throws(CountdownError) -> CountdownCounts {
        try await reading { tx, now, soonest in
            var counts: [Pair: Int] = [:]
            for row in try tx.counts() { counts[Pair(state: row.state, group: row.group), default: 0] += row.count }
            if soonest.anyDue(at: now) {
                for policy in CountdownPolicy.allCases {
                    for (group, count) in try tx.dueCounts(policy: policy, dueBy: now.timeline(policy)) {
                        counts[Pair(state: .running, group: group), default: 0] -= count
                        counts[Pair(state: .expired, group: group), default: 0] += count
                    }
                }
            }
            let entries = counts.filter { $0.value > 0 }
                .map { CountdownCounts.Entry(state: $0.key.state, group: $0.key.group, count: $0.value) }
                .sorted { ($0.state.rawValue, $0.group ?? "") < ($1.state.rawValue, $1.group ?? "") }
            return CountdownCounts(entries: entries)
        }
    }

    private struct Pair: Hashable {
        var state: CountdownState
        var group: String?
    }
}
