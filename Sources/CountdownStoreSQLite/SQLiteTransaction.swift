import CountdownStoreCore
import CountdownStoreSQL
import CSQLiteShim
import Foundation
import GRDB

/// One transaction's view of the tables.
///
/// Every statement is prepared once per connection and reused, and runs through
/// `Database.run(_:bind:row:)` (`StatementAccess.swift`): values bind and rows decode by position.
struct SQLiteTransaction: RepositoryWriting {
    let db: Database
    /// What this transaction has learnt once and need not ask again.
    private let memo = Memo()

    private final class Memo {
        /// Whether `countdown_retired_keys` holds any key (it changes only by `delete` and `deleteItems`).
        var anyRetiredKeys: Bool?
        /// The statements a transaction may run once per item (a group's starts), looked up once.
        var insertNew: Statement?
        var appendEvent: Statement?
        /// Events inserted ``EventRecord/rowsPerInsert`` to a statement.
        var appendEvents: Statement?
    }

    /// The connection's statement for `sql`, looked up once per transaction and kept in `slot`:
    /// the lookup hashes and compares its whole text, which costs more than binding it for one
    /// small row.
    private func statement(_ slot: inout Statement?, _ sql: String) throws -> Statement {
        if let statement = slot { return statement }
        let statement = try db.cachedStatement(sql: sql)
        slot = statement
        return statement
    }

    init(db: Database) {
        self.db = db
    }

    /// The SQL of each listing shape, rendered on first use: a list's statement is then looked up
    /// without building its text again.
    private static let listingSQL = Locked([Int: String]())

    // MARK: Reading

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
                for value in values {
                    switch value {
                    case .int(let number): bindings.add(number)
                    case .text(let text): bindings.add(text)
                    }
                }
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

    func events(_ listing: EventListing, limit: Int) throws -> [EventRecord] {
        switch listing {
        case .after(let id): try events(afterID: id, limit: limit)
        case .recent(let kinds): try recentEvents(kinds: kinds, limit: limit)
        case .recentOf(let key, let window): try recentEvents(key: key, window: window, limit: limit)
        }
    }

    private func events(afterID: Int64, limit: Int) throws -> [EventRecord] {
        try db.all(
            EventRecord.select + " WHERE id > ? ORDER BY id LIMIT ?",
            bind: {
                $0.add(afterID); $0.add(limit)
            }, { try EventRecord(row: $0) })
    }

    func lastEventID() throws -> Int64 {
        try db.first("SELECT coalesce(max(id), 0) FROM countdown_events") { try $0.int(0) } ?? 0
    }

    private func recentEvents(kinds: [String]?, limit: Int) throws -> [EventRecord] {
        guard let kinds else {
            return try db.all(
                EventRecord.select + " ORDER BY id DESC LIMIT ?", bind: { $0.add(limit) }, { try EventRecord(row: $0) })
        }
        let marks = Array(repeating: "?", count: kinds.count).joined(separator: ",")
        return try db.all(
            EventRecord.select + " WHERE kind IN (\(marks)) ORDER BY id DESC LIMIT ?",
            bind: { values in
                kinds.forEach { values.add($0) }
                values.add(limit)
            }, { try EventRecord(row: $0) })
    }

    private func recentEvents(key: String, window: Int, limit: Int) throws -> [EventRecord] {
        try db.all(
            "SELECT \(EventRecord.columns) FROM (SELECT * FROM countdown_events ORDER BY id DESC LIMIT ?) AS recent"
                + " WHERE key = ? ORDER BY id DESC LIMIT ?",
            bind: { values in
                values.add(window)
                values.add(key)
                values.add(limit)
            }, { try EventRecord(row: $0) })
    }

    func items(keys: [String]) throws -> [ItemRecord] {
        // Whole chunks share one prepared statement; only the last, shorter chunk needs its own.
        var items: [ItemRecord] = []
        for start in stride(from: 0, to: keys.count, by: 500) {
            let chunk = keys[start..<min(start + 500, keys.count)]
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            items += try db.all(
                ItemRecord.select + " WHERE key IN (\(marks))", bind: { values in chunk.forEach { values.add($0) } },
                { try ItemRecord(row: $0) })
        }
        return items
    }

    func consumerCursor(_ name: String) throws -> Int64? {
        try db.first("SELECT last_event_id FROM countdown_consumers WHERE name = ?", bind: { $0.add(name) }) {
            try $0.int(0)
        }
    }

    func consumerClaims(_ name: String) throws -> [ConsumerClaim] {
        try db.all(
            """
            SELECT first_event_id, last_event_id, acked_through, claimant, claimed_until_ms
            FROM countdown_consumer_claims WHERE consumer = ? ORDER BY first_event_id
            """, bind: { $0.add(name) }
        ) { columns in
            ConsumerClaim(
                consumer: name, firstID: try columns.int(0), lastID: try columns.int(1),
                ackedThrough: try columns.int(2),
                claimant: try columns.text(3), claimedUntilMs: try columns.int(4))
        }
    }

    // MARK: Writing

    /// A savepoint from statements prepared once per connection: a group commit opens one per
    /// write, where GRDB's `inSavepoint` would prepare two statements each time. Nested savepoints
    /// share the name; SQLite releases and rolls back the innermost of that name.
    func savepoint<T>(_ body: () throws -> T) throws -> T {
        guard db.isInsideTransaction else {
            var value: T?
            try db.inSavepoint {
                value = try body()
                return .commit
            }
            guard let value else { throw CountdownError(.storageFailure, "a savepoint ended without a value") }
            return value
        }
        try db.cachedStatement(sql: "SAVEPOINT countdown_write").execute()
        do {
            let value = try body()
            try db.cachedStatement(sql: "RELEASE SAVEPOINT countdown_write").execute()
            return value
        } catch {
            if db.isInsideTransaction {
                try? db.cachedStatement(sql: "ROLLBACK TO SAVEPOINT countdown_write").execute()
                try? db.cachedStatement(sql: "RELEASE SAVEPOINT countdown_write").execute()
            }
            throw error
        }
    }

    func save(_ checkpoint: Checkpoint, creating: Bool) throws {
        let sql =
            creating
            ? """
            INSERT OR IGNORE INTO countdown_clock (created_at_ms, active_ms, gap_ms, heartbeat_at_ms,
                heartbeat_boot_ms, boot_id, wall_floor_ms, suspended, calibration_offset_ms, calibrated_at_ms,
                clock_skew_ms, id)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)
            """
            : """
            UPDATE countdown_clock SET created_at_ms = ?, active_ms = ?, gap_ms = ?, heartbeat_at_ms = ?,
                heartbeat_boot_ms = ?, boot_id = ?, wall_floor_ms = ?, suspended = ?, calibration_offset_ms = ?,
                calibrated_at_ms = ?, clock_skew_ms = ?
            WHERE id = 1
            """
        try db.run(sql) { values in
            values.add(checkpoint.createdAt)
            values.add(checkpoint.active)
            values.add(checkpoint.gap)
            values.add(checkpoint.heartbeatAt)
            values.add(checkpoint.heartbeatBoot)
            values.add(checkpoint.bootID)
            values.add(checkpoint.wallFloor)
            values.add(checkpoint.suspended)
            values.add(checkpoint.calibrationOffset)
            values.add(checkpoint.calibratedAt)
            values.add(checkpoint.clockSkew)
        }
    }

    func save(_ lease: Lease) throws {
        try db.run("UPDATE countdown_lease SET holder = ?, acquired_at_ms = ?, expires_at_ms = ? WHERE id = 1") {
            values in
            values.add(lease.holder)
            values.add(lease.acquiredAtMs)
            values.add(lease.expiresAtMs)
        }
    }

    func insertNew(_ item: inout ItemRecord) throws -> Bool {
        // Removed keys are rare: look one up only when this transaction found any at all.
        if memo.anyRetiredKeys == nil {
            memo.anyRetiredKeys = try db.first("SELECT EXISTS (SELECT 1 FROM countdown_retired_keys)") {
                try $0.bool(0)
            }
        }
        if memo.anyRetiredKeys == true, let retired = try retiredGeneration(key: item.key) {
            item.generation = max(item.generation, retired + 1)
        }
        try db.run(statement(&memo.insertNew, ItemRecord.insertNewSQL), bind: item.bind)
        guard db.changesCount == 1 else { return false }
        item.id = db.lastInsertedRowID
        return true
    }

    func update(_ item: ItemRecord) throws {
        try db.run(ItemRecord.updateSQL, bind: item.bind)
    }

    func recordExpiries(_ items: [ItemRecord], events: [EventRecord]) throws {
        // Each statement looked up once for the batch: the lookup hashes its whole text.
        let update = try db.cachedStatement(sql: ItemRecord.expireSQL)
        for item in items {
            try db.run(update) { values in
                values.add(item.id)
                values.add(item.finalElapsedMs)
                values.add(item.endedAtMs)
                values.add(item.expiredAtMs)
                values.add(item.updatedAtMs)
            }
        }
        try append(all: events)
    }

    func delete(_ item: ItemRecord) throws {
        memo.anyRetiredKeys = true
        try db.run("DELETE FROM countdowns WHERE id = ?") { $0.add(item.id) }
        try db.run(
            """
            INSERT INTO countdown_retired_keys (key, generation, removed_at_ms) VALUES (?1, ?2, ?3)
            ON CONFLICT (key) DO UPDATE SET generation = max(generation, ?2), removed_at_ms = ?3
            """
        ) { values in
            values.add(item.key)
            values.add(item.generation)
            values.add(item.updatedAtMs)
        }
    }

    func retiredGeneration(key: String) throws -> Int64? {
        try db.first("SELECT generation FROM countdown_retired_keys WHERE key = ?", bind: { $0.add(key) }) {
            try $0.int(0)
        }
    }

    func append(_ event: EventRecord) throws {
        try db.run(statement(&memo.appendEvent, EventRecord.insertSQL), bind: event.bind)
    }

    func append(all events: [EventRecord]) throws {
        var first = events.startIndex
        while first < events.endIndex {
            let rows = min(EventRecord.rowsPerInsert, events.endIndex - first)
            let statement =
                rows == EventRecord.rowsPerInsert
                ? try statement(&memo.appendEvents, EventRecord.insertSQL(rows: rows))
                : try db.cachedStatement(sql: EventRecord.insertSQL(rows: rows))
            try db.run(statement) { values in
                for event in events[first..<first + rows] { event.bind(&values) }
            }
            first += rows
        }
    }

    func createConsumer(_ name: String, cursor: Int64, at wallMs: Int64) throws {
        try db.run(
            "INSERT INTO countdown_consumers (name, last_event_id, updated_at_ms) VALUES (?, ?, ?) "
                + "ON CONFLICT (name) DO NOTHING"
        ) { values in
            values.add(name)
            values.add(cursor)
            values.add(wallMs)
        }
    }

    func advanceConsumer(_ name: String, to id: Int64, at wallMs: Int64) throws {
        try db.run(
            """
            INSERT INTO countdown_consumers (name, last_event_id, updated_at_ms) VALUES (?1, ?2, ?3)
            ON CONFLICT (name) DO UPDATE SET last_event_id = max(last_event_id, ?2), updated_at_ms = ?3
            """
        ) { values in
            values.add(name)
            values.add(id)
            values.add(wallMs)
        }
    }

    func save(_ claim: ConsumerClaim) throws {
        try db.run(
            """
            INSERT OR REPLACE INTO countdown_consumer_claims
                (consumer, first_event_id, last_event_id, acked_through, claimant, claimed_until_ms)
            VALUES (?, ?, ?, ?, ?, ?)
            """
        ) { values in
            values.add(claim.consumer)
            values.add(claim.firstID)
            values.add(claim.lastID)
            values.add(claim.ackedThrough)
            values.add(claim.claimant)
            values.add(claim.claimedUntilMs)
        }
    }

    func deleteClaims(_ consumer: String, through id: Int64) throws {
        try db.run("DELETE FROM countdown_consumer_claims WHERE consumer = ? AND last_event_id <= ?") { values in
            values.add(consumer)
            values.add(id)
        }
    }

    func deleteItems(endedBefore cutoffMs: Int64, at nowMs: Int64, limit: Int) throws -> Int {
        // The batch, oldest first (by the index on the end instant of ended items).
        let ids = try db.all(
            """
            SELECT id FROM countdowns INDEXED BY countdowns_ended_by_time
            WHERE state IN ('expired', 'cancelled') AND ended_at_ms < ? ORDER BY ended_at_ms LIMIT ?
            """,
            bind: { values in
                values.add(cutoffMs)
                values.add(Int64(limit))
            }
        ) { try $0.int(0) }
        guard !ids.isEmpty else { return 0 }
        let list = ids.map(String.init).joined(separator: ",")
        // Like `delete`: each key's last generation is kept, so the key's next life goes on from it.
        try db.execute(
            sql: """
                INSERT INTO countdown_retired_keys (key, generation, removed_at_ms)
                SELECT key, generation, ? FROM countdowns WHERE id IN (\(list))
                ON CONFLICT (key) DO UPDATE SET generation = max(generation, excluded.generation),
                    removed_at_ms = excluded.removed_at_ms
                """, arguments: [nowMs])
        memo.anyRetiredKeys = true
        try db.execute(sql: "DELETE FROM countdowns WHERE id IN (\(list))")
        return db.changesCount
    }

    func deleteEvents(before cutoffMs: Int64, throughID: Int64, limit: Int) throws -> (deleted: Int, more: Bool) {
        // Among the oldest `limit` events only: event IDs follow W, so once the oldest are not
        // old enough, none after them are, and no pass scans the rest of the table.
        let oldest = try db.all(
            "SELECT id, at_ms FROM countdown_events WHERE id <= ? ORDER BY id LIMIT ?",
            bind: { values in
                values.add(throughID)
                values.add(Int64(limit))
            }
        ) { (try $0.int(0), try $0.int(1)) }
        let doomed = oldest.prefix { $0.1 < cutoffMs }
        guard let last = doomed.last else { return (0, false) }
        try db.run("DELETE FROM countdown_events WHERE id >= ? AND id <= ?") { values in
            values.add(doomed[doomed.startIndex].0)
            values.add(last.0)
        }
        return (db.changesCount, doomed.count == limit)
    }

    func deleteRetiredKeys(removedBefore cutoffMs: Int64, limit: Int) throws -> Int {
        try db.run(
            """
            DELETE FROM countdown_retired_keys WHERE rowid IN (
                SELECT rowid FROM countdown_retired_keys INDEXED BY countdown_retired_keys_by_time
                WHERE removed_at_ms < min(?1, coalesce((SELECT at_ms FROM countdown_events ORDER BY id LIMIT 1), ?1))
                ORDER BY removed_at_ms LIMIT ?2)
            """
        ) { values in
            values.add(cutoffMs)
            values.add(Int64(limit))
        }
        let deleted = db.changesCount
        if deleted > 0 { memo.anyRetiredKeys = nil }
        return deleted
    }

    func consumers() throws -> [(name: String, cursor: Int64, updatedAtMs: Int64)] {
        try db.all("SELECT name, last_event_id, updated_at_ms FROM countdown_consumers ORDER BY name") { row in
            (try row.text(0), try row.int(1), try row.int(2))
        }
    }
}
