import Foundation

/// A list of countdown rows as every engine queries it: its conditions (SQL with a `?` for each
/// value, in the dialect both engines read), its order, and the index that serves it. The
/// predicates and orders of every list are written here once; an engine renders them in its own
/// placeholders (`?` or `$n`) and table name, and may name the index (SQLite does, so that its
/// plan never depends on statistics).
package struct ItemListing: Sendable, Hashable {
    /// A value a condition binds.
    package enum Value: Sendable, Hashable {
        case int(Int64)
        case text(String)
    }

    /// One condition and the values of its `?`s, in order.
    package struct Condition: Sendable, Hashable {
        /// The condition, with a `?` for each value.
        package var sql: String
        /// The values of its `?`s.
        package var values: [Value]
    }

    /// The conditions, joined by `AND`.
    package private(set) var conditions: [Condition]
    /// The `ORDER BY` expression, or `nil` for any order.
    package let order: String?
    /// The index that serves the list in its order (its name on every engine), if one does.
    package let index: String?
    /// Which list this is and which of its optional conditions it has: two listings of the same
    /// shape differ only in their values, so an engine may render a shape's SQL once and keep it.
    package private(set) var shape: Int

    private init(_ condition: String, _ values: [Value] = [], order: String?, index: String?, kind: Int) {
        self.conditions = [Condition(sql: condition, values: values)]
        self.order = order
        self.index = index
        self.shape = kind << 8
    }

    /// Adds `AND condition` binding `value`, when there is a value; `bit` marks it in ``shape``.
    private func and(_ condition: String, _ value: String?, bit: Int) -> ItemListing {
        value.map { adding(condition, [.text($0)], bit: bit) } ?? self
    }

    /// Adds `AND condition` binding `value`, when there is a value; `bit` marks it in ``shape``.
    private func and(_ condition: String, _ value: Int64?, bit: Int) -> ItemListing {
        value.map { adding(condition, [.int($0)], bit: bit) } ?? self
    }

    /// Adds a keyset condition on `(sort value, key)`, when there is a position to start after.
    private func and(_ condition: String, _ position: SortPosition?, bit: Int) -> ItemListing {
        position.map { adding(condition, [.int($0.value), .text($0.key)], bit: bit) } ?? self
    }

    private func adding(_ condition: String, _ values: [Value], bit: Int) -> ItemListing {
        var listing = self
        listing.conditions.append(Condition(sql: condition, values: values))
        listing.shape |= 1 << bit
        return listing
    }

    private static let runningOn = "state = 'running' AND deadline_ms IS NOT NULL AND policy = ?"

    private static func runningIndex(_ group: String?) -> String {
        group == nil ? "countdowns_running_by_deadline" : "countdowns_running_by_group"
    }

    /// Running countdowns of `policy` by deadline, then key (see ``RepositoryReading/running(policy:group:after:notDueBy:limit:)``).
    package static func running(policy: CountdownPolicy, group: String?, after: SortPosition?, notDueBy: Int64?) -> ItemListing {
        ItemListing(runningOn, [.text(policy.rawValue)], order: "deadline_ms, key", index: runningIndex(group), kind: 1)
            .and("group_name = ?", group, bit: 0)
            .and("deadline_ms > ?", notDueBy, bit: 1)
            .and("(deadline_ms, key) > (?, ?)", after, bit: 2)
    }

    /// Running countdowns of `policy` due by `deadline`, soonest first.
    package static func running(policy: CountdownPolicy, dueBy deadline: Int64, group: String?) -> ItemListing {
        ItemListing(runningOn, [.text(policy.rawValue)], order: "deadline_ms, key", index: runningIndex(group), kind: 2)
            .and("deadline_ms <= ?", deadline, bit: 1)
            .and("group_name = ?", group, bit: 0)
    }

    /// Running countdowns of `policy` due by `deadline`, latest first, before `before`.
    package static func runningLatestFirst(
        policy: CountdownPolicy, dueBy deadline: Int64, group: String?, before: SortPosition?
    ) -> ItemListing {
        ItemListing(
            runningOn, [.text(policy.rawValue)], order: "deadline_ms DESC, key DESC", index: runningIndex(group), kind: 3
        )
        .and("group_name = ?", group, bit: 0)
        .and("deadline_ms <= ?", deadline, bit: 1)
        .and("(deadline_ms, key) < (?, ?)", before, bit: 2)
    }

    /// Paused countdowns by remaining time (`deadline_ms - paused_at_ms`), then key.
    package static func paused(group: String?, after: SortPosition?) -> ItemListing {
        ItemListing(
            "state = 'paused' AND deadline_ms IS NOT NULL", order: "(deadline_ms - paused_at_ms), key",
            index: group == nil ? "countdowns_paused_by_remaining" : "countdowns_paused_by_group", kind: 4
        )
        .and("group_name = ?", group, bit: 0)
        .and("((deadline_ms - paused_at_ms), key) > (?, ?)", after, bit: 2)
    }

    /// Running or paused stopwatches (or only those in `states`), by key.
    package static func activeStopwatches(_ states: Set<CountdownState>, group: String?, afterKey: String?) -> ItemListing {
        // Both states use the index as it is; one state filters its entries (written out: a literal).
        let only = states.count == 1 ? states.first.map { " AND state = '\($0.rawValue)'" } ?? "" : ""
        // The shape follows the SQL: one kind per state written out, so that no two texts share one.
        let kind = states.count == 1 ? 16 + (states.first.flatMap { CountdownState.allCases.firstIndex(of: $0) } ?? 0) : 5
        return ItemListing(
            "kind = 'stopwatch' AND state IN ('running', 'paused')" + only, order: "key",
            index: group == nil ? "countdowns_active_stopwatches" : "countdowns_active_stopwatches_by_group", kind: kind
        )
        .and("group_name = ?", group, bit: 0)
        .and("key > ?", afterKey, bit: 2)
    }

    /// Expired countdowns, most recent first, since `sinceMs`.
    package static func expired(sinceMs: Int64?, group: String?, after: SortPosition?) -> ItemListing {
        ItemListing(
            "state = 'expired'", order: "expired_at_ms DESC, key DESC",
            index: group == nil ? "countdowns_expired_by_time" : "countdowns_expired_by_group", kind: 8
        )
        .and("expired_at_ms >= ?", sinceMs, bit: 1)
        .and("group_name = ?", group, bit: 0)
        .and("(expired_at_ms, key) < (?, ?)", after, bit: 2)
    }

    /// Cancelled items, most recent first.
    package static func cancelled(group: String?, after: SortPosition?) -> ItemListing {
        ItemListing(
            "state = 'cancelled'", order: "ended_at_ms DESC, key DESC",
            index: group == nil ? "countdowns_cancelled_by_time" : "countdowns_cancelled_by_group", kind: 9
        )
        .and("group_name = ?", group, bit: 0)
        .and("(ended_at_ms, key) < (?, ?)", after, bit: 2)
    }

    /// Running and paused items, in no order.
    package static func activeItems(group: String?) -> ItemListing {
        ItemListing("state IN ('running', 'paused')", order: nil, index: nil, kind: 10).and("group_name = ?", group, bit: 0)
    }

    /// The conditions joined by `AND`, each `?` given by `placeholder` (called with the number of
    /// the value, from `firstValue`) or left as it is without one, and the values in order.
    package func whereClause(firstValue: Int = 1, placeholder: ((Int) -> String)? = nil) -> (sql: String, values: [Value]) {
        guard let placeholder else {
            // `?` as it is: the conditions joined, nothing to number.
            return (conditions.map(\.sql).joined(separator: " AND "), conditions.flatMap(\.values))
        }
        var sql = ""
        var values: [Value] = []
        for (number, condition) in conditions.enumerated() {
            if number > 0 { sql += " AND " }
            var parts = condition.sql.split(separator: "?", omittingEmptySubsequences: false).makeIterator()
            sql += parts.next().map(String.init) ?? ""
            for value in condition.values {
                values.append(value)
                sql += placeholder(firstValue + values.count - 1) + (parts.next().map(String.init) ?? "")
            }
        }
        return (sql, values)
    }
}

extension RepositoryReading {
    /// Running countdowns of `policy` by deadline, then key: after `after`, and (with `notDueBy`)
    /// only those not due by then.
    package func running(policy: CountdownPolicy, group: String?, after: SortPosition?, notDueBy: Int64?, limit: Int) throws -> [ItemRecord] {
        try items(.running(policy: policy, group: group, after: after, notDueBy: notDueBy), limit: limit)
    }

    /// Running countdowns of `policy` due by `deadline`, soonest first.
    package func running(policy: CountdownPolicy, dueBy deadline: Int64, group: String?, limit: Int) throws -> [ItemRecord] {
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
    package func activeStopwatches(_ states: Set<CountdownState>, group: String?, afterKey: String?, limit: Int) throws -> [ItemRecord] {
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
