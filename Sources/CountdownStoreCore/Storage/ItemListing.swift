import Foundation

/// A list of countdown rows as the core asks an engine for it: which rows (a ``List`` and its
/// bounds), in which order, and from which position on, as data. The engines render it in
/// their own query language (both engines' SQL: `SQLItemListing` of the `CountdownStoreSQL`
/// layer); an engine without SQL filters and sorts its own rows by the same rules.
package struct ItemListing: Sendable, Hashable {
    /// Which rows, and in which order.
    package enum List: Sendable, Hashable {
        /// Running countdowns of `policy` by deadline, then key; with `notDueBy`, only those due
        /// after it; after ``ItemListing/after`` by `(deadline, key)`.
        case running(policy: CountdownPolicy, notDueBy: Int64?)
        /// Running countdowns of `policy` due by `deadline`, soonest first.
        case due(policy: CountdownPolicy, by: Int64)
        /// Running countdowns of `policy` due by `deadline`, latest first; before
        /// ``ItemListing/after`` by `(deadline, key)`.
        case dueLatestFirst(policy: CountdownPolicy, by: Int64)
        /// Paused countdowns by remaining time (deadline less the instant of the pause), then key;
        /// after ``ItemListing/after`` by `(remaining, key)`.
        case paused
        /// Running or paused stopwatches (only those of `states` when it holds one state), by key;
        /// after ``ItemListing/afterKey``.
        case activeStopwatches(Set<CountdownState>)
        /// Expired countdowns, latest expiry first, expired at or after `since`; before
        /// ``ItemListing/after`` by `(expiry, key)`.
        case expired(since: Int64?)
        /// Cancelled items, latest end first; before ``ItemListing/after`` by `(end, key)`.
        case cancelled
        /// Running and paused items, in no order.
        case active
    }

    /// Which rows, and in which order.
    package var list: List
    /// Only the items of this group, when given.
    package var group: String?
    /// The position to go on from (after it in the list's order), when given.
    package var after: SortPosition?
    /// The key to go on from, for the lists ordered by key alone.
    package var afterKey: String?

    package init(_ list: List, group: String?, after: SortPosition? = nil, afterKey: String? = nil) {
        self.list = list
        self.group = group
        self.after = after
        self.afterKey = afterKey
    }

    /// Running countdowns of `policy` by deadline, then key
    /// (see ``RepositoryReading/running(policy:group:after:notDueBy:limit:)``).
    package static func running(policy: CountdownPolicy, group: String?, after: SortPosition?, notDueBy: Int64?)
        -> ItemListing
    {
        ItemListing(.running(policy: policy, notDueBy: notDueBy), group: group, after: after)
    }

    /// Running countdowns of `policy` due by `deadline`, soonest first.
    package static func running(policy: CountdownPolicy, dueBy deadline: Int64, group: String?) -> ItemListing {
        ItemListing(.due(policy: policy, by: deadline), group: group)
    }

    /// Running countdowns of `policy` due by `deadline`, latest first, before `before`.
    package static func runningLatestFirst(
        policy: CountdownPolicy, dueBy deadline: Int64, group: String?, before: SortPosition?
    ) -> ItemListing {
        ItemListing(.dueLatestFirst(policy: policy, by: deadline), group: group, after: before)
    }

    /// Paused countdowns by remaining time, then key.
    package static func paused(group: String?, after: SortPosition?) -> ItemListing {
        ItemListing(.paused, group: group, after: after)
    }

    /// Running or paused stopwatches (or only those in `states`), by key.
    package static func activeStopwatches(_ states: Set<CountdownState>, group: String?, afterKey: String?)
        -> ItemListing
    {
        ItemListing(.activeStopwatches(states), group: group, afterKey: afterKey)
    }

    /// Expired countdowns, most recent first, since `sinceMs`.
    package static func expired(sinceMs: Int64?, group: String?, after: SortPosition?) -> ItemListing {
        ItemListing(.expired(since: sinceMs), group: group, after: after)
    }

    /// Cancelled items, most recent first.
    package static func cancelled(group: String?, after: SortPosition?) -> ItemListing {
        ItemListing(.cancelled, group: group, after: after)
    }

    /// Running and paused items, in no order.
    package static func activeItems(group: String?) -> ItemListing {
        ItemListing(.active, group: group)
    }
}

extension RepositoryReading {
    /// Running countdowns of `policy` by deadline, then key: after `after`, and (with `notDueBy`)
    /// only those not due by then.
    package func running(policy: CountdownPolicy, group: String?, after: SortPosition?, notDueBy: Int64?, limit: Int)
        throws -> [ItemRecord]
    {
        try items(.running(policy: policy, group: group, after: after, notDueBy: notDueBy), limit: limit)
    }

    /// Running countdowns of `policy` due by `deadline`, soonest first.
    package func running(policy: CountdownPolicy, dueBy deadline: Int64, group: String?, limit: Int) throws
        -> [ItemRecord]
    {
        try items(.running(policy: policy, dueBy: deadline, group: group), limit: limit)
    }

    /// Running countdowns of `policy` due by `deadline`, latest first, before `before`.
    package func runningLatestFirst(
        policy: CountdownPolicy, dueBy deadline: Int64, group: String?, before: SortPosition?, limit: Int
    ) throws -> [ItemRecord] {
        try items(.runningLatestFirst(policy: policy, dueBy: deadline, group: group, before: before), limit: limit)
    }

    /// Paused countdowns by remaining time, then key.
    package func paused(group: String?, after: SortPosition?, limit: Int) throws -> [ItemRecord] {
        try items(.paused(group: group, after: after), limit: limit)
    }

    /// Running or paused stopwatches, by key.
    package func activeStopwatches(_ states: Set<CountdownState>, group: String?, afterKey: String?, limit: Int) throws
        -> [ItemRecord]
    {
        try items(.activeStopwatches(states, group: group, afterKey: afterKey), limit: limit)
    }

    /// Expired countdowns, most recent first.
    package func expired(sinceMs: Int64?, group: String?, after: SortPosition?, limit: Int) throws -> [ItemRecord] {
        try items(.expired(sinceMs: sinceMs, group: group, after: after), limit: limit)
    }

    /// Cancelled items, most recent first.
    package func cancelled(group: String?, after: SortPosition?, limit: Int) throws -> [ItemRecord] {
        try items(.cancelled(group: group, after: after), limit: limit)
    }

    /// Running and paused items, in no order.
    package func activeItems(group: String?, limit: Int) throws -> [ItemRecord] {
        try items(.activeItems(group: group), limit: limit)
    }
}
