import CountdownStoreCore
import CountdownStoreSQL
import CSQLiteShim
import Foundation
import GRDB

// The reads of an SQLite transaction (`RepositoryReading`) that are its own; those both engines
// share are written once, in `CountdownStoreSQL`.
extension SQLiteTransaction {
    func holdsItemsOrEvents() throws -> Bool {
        try db.first("SELECT EXISTS (SELECT 1 FROM countdowns) OR EXISTS (SELECT 1 FROM countdown_events)") {
            try $0.bool(0)
        } ?? false
    }

    func checkpoint() throws -> Checkpoint? {
        try db.first("SELECT \(Checkpoint.selectedColumns) FROM countdown_clock WHERE id = 1") {
            try Checkpoint(row: $0)
        }
    }

    func lease() throws -> Lease {
        try db.first("SELECT holder, acquired_at_ms, expires_at_ms FROM countdown_lease WHERE id = 1") { row in
            try Lease(row: row)
        } ?? Lease(holder: nil, acquiredAtMs: nil, expiresAtMs: 0)
    }

    func clocks() throws -> (Checkpoint?, Lease, SoonestDeadlines) {
        // Whether any key was ever removed comes along: a start needs it, and it costs no statement here.
        // So do the soonest deadlines, two index lookups: whether anything has come due.
        let sql = """
            SELECT \(Checkpoint.selectedColumns), l.holder, l.acquired_at_ms, l.expires_at_ms,
                EXISTS (SELECT 1 FROM countdown_retired_keys),
                (SELECT deadline_ms FROM countdowns INDEXED BY countdowns_running_by_deadline
                 WHERE state = 'running' AND deadline_ms IS NOT NULL AND policy = 'wall' ORDER BY deadline_ms LIMIT 1),
                (SELECT deadline_ms FROM countdowns INDEXED BY countdowns_running_by_deadline
                 WHERE state = 'running' AND deadline_ms IS NOT NULL AND policy = 'active' ORDER BY deadline_ms LIMIT 1)
            FROM countdown_clock AS c LEFT JOIN countdown_lease AS l ON l.id = 1
            WHERE c.id = 1
            """
        return try db.first(sql) { row in
            if memo.anyRetiredKeys == nil { memo.anyRetiredKeys = try row.bool(14) }
            let soonest = SoonestDeadlines(wall: row.optionalInt(15), active: row.optionalInt(16))
            return (try Checkpoint(row: row), try Lease(row: row, from: 11), soonest)
        } ?? (nil, try lease(), SoonestDeadlines())
    }

    /// The list in the core's predicates and order, through the index it names: the plan never
    /// depends on statistics (without them, SQLite may prefer sorting every paused item to
    /// walking the index that is already in order).
    func items(_ wanted: ItemListing, limit: Int) throws -> [ItemRecord] {
        let listing = SQLItemListing(wanted)
        let values = listing.conditions.flatMap(\.values)
        let sql = Self.listingSQL.withLock { rendered in
            if let sql = rendered[listing.shape] { return sql }
            let sql =
                ItemRecord.select + (listing.index.map { " INDEXED BY " + $0 } ?? "") + " WHERE "
                + listing.whereClause().sql + (listing.order.map { " ORDER BY " + $0 } ?? "") + " LIMIT ?"
            rendered[listing.shape] = sql
            return sql
        }
        return try db.all(
            sql,
            bind: { bindings in
                for value in values { bindings.add(value) }
                bindings.add(limit)
            }, { try ItemRecord(row: $0) })
    }

    func dueCounts(policy: CountdownPolicy, dueBy deadline: Int64) throws -> [(group: String?, count: Int)] {
        try db.all(
            """
            SELECT group_name, count(*) FROM countdowns INDEXED BY countdowns_running_by_deadline
            WHERE state = 'running' AND deadline_ms IS NOT NULL AND policy = ? AND deadline_ms <= ? GROUP BY group_name
            """,
            bind: { values in
                values.add(policy.rawValue)
                values.add(deadline)
            }
        ) { row in (row.optionalText(0), Int(try row.int(1))) }
    }

    func counts() throws -> [CountRow] {
        try db.all("SELECT state, group_name, count(*) FROM countdowns GROUP BY state, group_name") { row in
            (CountdownState(rawValue: try row.text(0)), row.optionalText(1), try row.int(2))
        }.compactMap { state, group, count in
            state.map { CountRow(state: $0, group: group, count: Int(count)) }
        }
    }
}
