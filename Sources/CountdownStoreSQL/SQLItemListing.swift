import CountdownStoreCore
import Foundation

/// A list of countdown rows (the core's ``ItemListing``) in the SQL both engines read: its
/// conditions (with a `?` for each value), its order, and the index that serves it. Every list's
/// predicates and order are written here once; an engine renders them in its own placeholders
/// (`?` or `$n`) and table name, and may name the index (the embedded engine does, so that its
/// plan never depends on statistics).
package struct SQLItemListing: Sendable, Hashable {
    /// One condition and the values of its `?`s, in order.
    package struct Condition: Sendable, Hashable {
        /// The condition, with a `?` for each value.
        package var sql: String
        /// The values of its `?`s.
        package var values: [SQLValue]
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

    private init(_ condition: String, _ values: [SQLValue] = [], order: String?, index: String?, kind: Int) {
        self.conditions = [Condition(sql: condition, values: values)]
        self.order = order
        self.index = index
        self.shape = kind << 8
    }

    /// `listing` in SQL.
    package init(_ listing: ItemListing) {
        let group = listing.group
        switch listing.list {
        case .running(let policy, let notDueBy):
            self = Self(
                Self.runningOn, [.text(policy.rawValue)], order: "deadline_ms, key", index: Self.runningIndex(group),
                kind: 1
            )
            .and("group_name = ?", group, bit: 0)
            .and("deadline_ms > ?", notDueBy, bit: 1)
            .and("(deadline_ms, key) > (?, ?)", listing.after, bit: 2)
        case .due(let policy, let deadline):
            self = Self(
                Self.runningOn, [.text(policy.rawValue)], order: "deadline_ms, key", index: Self.runningIndex(group),
                kind: 2
            )
            .and("deadline_ms <= ?", deadline, bit: 1)
            .and("group_name = ?", group, bit: 0)
        case .dueLatestFirst(let policy, let deadline):
            self = Self(
                Self.runningOn, [.text(policy.rawValue)], order: "deadline_ms DESC, key DESC",
                index: Self.runningIndex(group), kind: 3
            )
            .and("group_name = ?", group, bit: 0)
            .and("deadline_ms <= ?", deadline, bit: 1)
            .and("(deadline_ms, key) < (?, ?)", listing.after, bit: 2)
        case .paused:
            self = Self(
                "state = 'paused' AND deadline_ms IS NOT NULL", order: "(deadline_ms - paused_at_ms), key",
                index: group == nil ? "countdowns_paused_by_remaining" : "countdowns_paused_by_group", kind: 4
            )
            .and("group_name = ?", group, bit: 0)
            .and("((deadline_ms - paused_at_ms), key) > (?, ?)", listing.after, bit: 2)
        case .activeStopwatches(let states):
            // Both states use the index as it is; one state filters its entries (written out: a literal).
            let only = states.count == 1 ? states.first.map { " AND state = '\($0.rawValue)'" } ?? "" : ""
            // The shape follows the SQL: one kind per state written out, so that no two texts share one.
            let kind =
                states.count == 1 ? 16 + (states.first.flatMap { CountdownState.allCases.firstIndex(of: $0) } ?? 0) : 5
            self = Self(
                "kind = 'stopwatch' AND state IN ('running', 'paused')" + only, order: "key",
                index: group == nil ? "countdowns_active_stopwatches" : "countdowns_active_stopwatches_by_group",
                kind: kind
            )
            .and("group_name = ?", group, bit: 0)
            .and("key > ?", listing.afterKey, bit: 2)
        case .expired(let since):
            self = Self(
                "state = 'expired'", order: "expired_at_ms DESC, key DESC",
                index: group == nil ? "countdowns_expired_by_time" : "countdowns_expired_by_group", kind: 8
            )
            .and("expired_at_ms >= ?", since, bit: 1)
            .and("group_name = ?", group, bit: 0)
            .and("(expired_at_ms, key) < (?, ?)", listing.after, bit: 2)
        case .cancelled:
            self = Self(
                "state = 'cancelled'", order: "ended_at_ms DESC, key DESC",
                index: group == nil ? "countdowns_cancelled_by_time" : "countdowns_cancelled_by_group", kind: 9
            )
            .and("group_name = ?", group, bit: 0)
            .and("(ended_at_ms, key) < (?, ?)", listing.after, bit: 2)
        case .active:
            self = Self("state IN ('running', 'paused')", order: nil, index: nil, kind: 10).and(
                "group_name = ?", group, bit: 0)
        }
    }

    /// Adds `AND condition` binding `value`, when there is a value; `bit` marks it in ``shape``.
    private func and(_ condition: String, _ value: String?, bit: Int) -> SQLItemListing {
        value.map { adding(condition, [.text($0)], bit: bit) } ?? self
    }

    /// Adds `AND condition` binding `value`, when there is a value; `bit` marks it in ``shape``.
    private func and(_ condition: String, _ value: Int64?, bit: Int) -> SQLItemListing {
        value.map { adding(condition, [.int($0)], bit: bit) } ?? self
    }

    /// Adds a keyset condition on `(sort value, key)`, when there is a position to start after.
    private func and(_ condition: String, _ position: SortPosition?, bit: Int) -> SQLItemListing {
        position.map { adding(condition, [.int($0.value), .text($0.key)], bit: bit) } ?? self
    }

    private func adding(_ condition: String, _ values: [SQLValue], bit: Int) -> SQLItemListing {
        var listing = self
        listing.conditions.append(Condition(sql: condition, values: values))
        listing.shape |= 1 << bit
        return listing
    }

    private static let runningOn = "state = 'running' AND deadline_ms IS NOT NULL AND policy = ?"

    private static func runningIndex(_ group: String?) -> String {
        group == nil ? "countdowns_running_by_deadline" : "countdowns_running_by_group"
    }

    /// The conditions joined by `AND`, each `?` given by `placeholder` (called with the number of
    /// the value, from `firstValue`) or left as it is without one, and the values in order.
    package func whereClause(firstValue: Int = 1, placeholder: ((Int) -> String)? = nil) -> (
        sql: String, values: [SQLValue]
    ) {
        guard let placeholder else {
            // `?` as it is: the conditions joined, nothing to number.
            return (conditions.map(\.sql).joined(separator: " AND "), conditions.flatMap(\.values))
        }
        var sql = ""
        var values: [SQLValue] = []
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
