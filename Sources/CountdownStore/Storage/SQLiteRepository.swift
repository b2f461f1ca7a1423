import Foundation
import GRDB

/// The repository on an SQLite database through GRDB. Writes run in `BEGIN IMMEDIATE`
/// transactions (GRDB's default for writes), so they never fail half-way for lack of a lock.
struct SQLiteRepository: CountdownRepository {
    let writer: any DatabaseWriter

    func read<T: Sendable>(_ body: @escaping @Sendable (any RepositoryReading) throws -> T) async throws -> T {
        try await translatingErrors {
            try await writer.read { db in try body(SQLiteTransaction(db: db)) }
        }
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (any RepositoryWriting) throws -> T) async throws -> T {
        try await translatingErrors {
            try await writer.write { db in try body(SQLiteTransaction(db: db)) }
        }
    }
}

/// Turns SQLite failures into ``CountdownError``s; lets ``CountdownError``s through.
func translatingErrors<T>(path: String? = nil, _ body: () async throws -> T) async throws(CountdownError) -> T {
    do {
        return try await body()
    } catch {
        throw CountdownError(storage: error, path: path)
    }
}

/// Synchronous twin of ``translatingErrors(path:_:)``.
func translatingErrorsNow<T>(path: String? = nil, _ body: () throws -> T) throws(CountdownError) -> T {
    do {
        return try body()
    } catch {
        throw CountdownError(storage: error, path: path)
    }
}

extension CountdownError {
    /// A storage failure described for people.
    init(storage error: any Error, path: String?) {
        if let error = error as? CountdownError {
            self = error
            return
        }
        let place = path.map { " at \(quoted($0, limit: 200))" } ?? ""
        guard let error = error as? DatabaseError else {
            self.init(.storageFailure, "storage failure\(place): \(error)")
            return
        }
        let detail = error.message ?? "\(error.resultCode)"
        switch error.resultCode {
        case .SQLITE_NOTADB, .SQLITE_CORRUPT:
            self.init(.unreadableDatabase, "the file\(place) is not a readable SQLite database (\(detail)); it was left untouched")
        case .SQLITE_FULL:
            self.init(.storageFailure, "disk full writing the database\(place): \(detail)")
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            self.init(.storageFailure, "the database\(place) stayed locked by another process: \(detail)")
        default:
            self.init(.storageFailure, "storage failure\(place): \(detail) (\(error.resultCode))")
        }
    }
}

/// One transaction's view of the tables.
struct SQLiteTransaction: RepositoryWriting {
    let db: Database

    // MARK: Reading

    func checkpoint() throws -> Checkpoint? {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM countdown_clock WHERE id = 1") else { return nil }
        return Checkpoint(
            createdAt: try row.decode(forColumn: "created_at_ms"), active: try row.decode(forColumn: "active_ms"), gap: try row.decode(forColumn: "gap_ms"),
            heartbeatAt: try row.decode(forColumn: "heartbeat_at_ms"), heartbeatBoot: try row.decode(forColumn: "heartbeat_boot_ms"), bootID: try row.decode(forColumn: "boot_id"),
            wallFloor: try row.decode(forColumn: "wall_floor_ms"), suspended: try row.decode(forColumn: "suspended"),
            calibrationOffset: try row.decode(forColumn: "calibration_offset_ms"), calibratedAt: try row.decode(forColumn: "calibrated_at_ms"),
            clockSkew: try row.decode(forColumn: "clock_skew_ms"))
    }

    func lease() throws -> Lease {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM countdown_lease WHERE id = 1") else {
            return Lease(holder: nil, acquiredAtMs: nil, expiresAtMs: 0)
        }
        return Lease(holder: try row.decode(forColumn: "holder"), acquiredAtMs: try row.decode(forColumn: "acquired_at_ms"), expiresAtMs: try row.decode(forColumn: "expires_at_ms"))
    }

    func item(key: String) throws -> ItemRecord? {
        try ItemRecord.fetchOne(db, sql: "SELECT * FROM countdowns WHERE key = ?", arguments: [key])
    }

    func running(policy: CountdownPolicy, group: String?, after: SortPosition?, limit: Int) throws -> [ItemRecord] {
        try ItemQuery("state = 'running' AND deadline_ms IS NOT NULL AND policy = ?", [policy.rawValue])
            .and("group_name = ?", group)
            .and("(deadline_ms, key) > (?, ?)", after)
            .fetch(db, orderedBy: "deadline_ms, key", limit: limit)
    }

    func running(policy: CountdownPolicy, dueBy deadline: Int64, group: String?, limit: Int) throws -> [ItemRecord] {
        try ItemQuery(
            "state = 'running' AND deadline_ms IS NOT NULL AND policy = ? AND deadline_ms <= ?", [policy.rawValue, deadline]
        )
        .and("group_name = ?", group)
        .fetch(db, orderedBy: "deadline_ms, key", limit: limit)
    }

    func paused(group: String?, after: SortPosition?, limit: Int) throws -> [ItemRecord] {
        try ItemQuery("state = 'paused' AND deadline_ms IS NOT NULL")
            .and("group_name = ?", group)
            .and("(deadline_ms - paused_at_ms, key) > (?, ?)", after)
            .fetch(db, orderedBy: "deadline_ms - paused_at_ms, key", limit: limit)
    }

    func activeStopwatches(group: String?, afterKey: String?, limit: Int) throws -> [ItemRecord] {
        try ItemQuery("kind = 'stopwatch' AND state IN ('running', 'paused')")
            .and("group_name = ?", group)
            .and("key > ?", afterKey)
            .fetch(db, orderedBy: "key", limit: limit)
    }

    func expired(sinceMs: Int64?, group: String?, limit: Int) throws -> [ItemRecord] {
        try ItemQuery("state = 'expired'")
            .and("expired_at_ms >= ?", sinceMs)
            .and("group_name = ?", group)
            .fetch(db, orderedBy: "expired_at_ms DESC, key", limit: limit)
    }

    func nextDeadline(policy: CountdownPolicy) throws -> ItemRecord? {
        try ItemRecord.fetchOne(
            db,
            sql: """
                SELECT * FROM countdowns
                WHERE state = 'running' AND deadline_ms IS NOT NULL AND policy = ?
                ORDER BY deadline_ms LIMIT 1
                """,
            arguments: [policy.rawValue])
    }

    func counts() throws -> [CountRow] {
        try Row.fetchAll(
            db, sql: "SELECT state, group_name, count(*) AS n FROM countdowns GROUP BY state, group_name"
        ).compactMap { row in
            guard let state = CountdownState(rawValue: try row.decode(forColumn: "state")) else { return nil }
            return CountRow(state: state, group: try row.decode(forColumn: "group_name"), count: try row.decode(forColumn: "n"))
        }
    }

    func events(afterID: Int64, limit: Int) throws -> [EventRecord] {
        try EventRecord.fetchAll(
            db, sql: "SELECT * FROM countdown_events WHERE id > ? ORDER BY id LIMIT ?", arguments: [afterID, limit])
    }

    func lastEventID() throws -> Int64 {
        try Int64.fetchOne(db, sql: "SELECT coalesce(max(id), 0) FROM countdown_events") ?? 0
    }

    func ended(_ state: CountdownState, group: String?, limit: Int) throws -> [ItemRecord] {
        try ItemQuery("state = ?", [state.rawValue])
            .and("group_name = ?", group)
            .fetch(db, orderedBy: "ended_at_ms DESC, key", limit: limit)
    }

    func recentEvents(kinds: [String]?, limit: Int) throws -> [EventRecord] {
        guard let kinds else {
            return try EventRecord.fetchAll(
                db, sql: "SELECT * FROM countdown_events ORDER BY id DESC LIMIT ?", arguments: [limit])
        }
        let marks = Array(repeating: "?", count: kinds.count).joined(separator: ",")
        return try EventRecord.fetchAll(
            db, sql: "SELECT * FROM countdown_events WHERE kind IN (\(marks)) ORDER BY id DESC LIMIT ?",
            arguments: StatementArguments(kinds) + [limit])
    }

    func items(keys: [String]) throws -> [ItemRecord] {
        var items: [ItemRecord] = []
        for start in stride(from: 0, to: keys.count, by: 500) {
            let chunk = Array(keys[start..<min(start + 500, keys.count)])
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            items += try ItemRecord.fetchAll(
                db, sql: "SELECT * FROM countdowns WHERE key IN (\(marks))", arguments: StatementArguments(chunk))
        }
        return items
    }

    func activeItems(group: String?, limit: Int) throws -> [ItemRecord] {
        if let group {
            return try ItemRecord.fetchAll(
                db,
                sql: "SELECT * FROM countdowns WHERE state IN ('running', 'paused') AND group_name = ? LIMIT ?",
                arguments: [group, limit])
        }
        return try ItemRecord.fetchAll(
            db, sql: "SELECT * FROM countdowns WHERE state IN ('running', 'paused') LIMIT ?", arguments: [limit])
    }

    func consumerCursor(_ name: String) throws -> Int64? {
        try Int64.fetchOne(db, sql: "SELECT last_event_id FROM countdown_consumers WHERE name = ?", arguments: [name])
    }

    // MARK: Writing

    func save(_ checkpoint: Checkpoint, creating: Bool) throws {
        let verb = creating ? "INSERT OR IGNORE INTO" : "REPLACE INTO"
        try db.execute(
            sql: """
                \(verb) countdown_clock (id, created_at_ms, active_ms, gap_ms, heartbeat_at_ms, heartbeat_boot_ms,
                    boot_id, wall_floor_ms, suspended, calibration_offset_ms, calibrated_at_ms, clock_skew_ms)
                VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                checkpoint.createdAt, checkpoint.active, checkpoint.gap, checkpoint.heartbeatAt,
                checkpoint.heartbeatBoot, checkpoint.bootID, checkpoint.wallFloor, checkpoint.suspended,
                checkpoint.calibrationOffset, checkpoint.calibratedAt, checkpoint.clockSkew,
            ])
    }

    func save(_ lease: Lease) throws {
        try db.execute(
            sql: "UPDATE countdown_lease SET holder = ?, acquired_at_ms = ?, expires_at_ms = ? WHERE id = 1",
            arguments: [lease.holder, lease.acquiredAtMs, lease.expiresAtMs])
    }

    func insert(_ item: inout ItemRecord) throws {
        try item.insert(db)
    }

    func update(_ item: ItemRecord) throws {
        try item.update(db)
    }

    func delete(_ item: ItemRecord) throws {
        _ = try item.delete(db)
        try db.execute(
            sql: """
                INSERT INTO countdown_retired_keys (key, generation, removed_at_ms) VALUES (?1, ?2, ?3)
                ON CONFLICT (key) DO UPDATE SET generation = max(generation, ?2), removed_at_ms = ?3
                """,
            arguments: [item.key, item.generation, item.updatedAtMs])
    }

    func retiredGeneration(key: String) throws -> Int64? {
        try Int64.fetchOne(db, sql: "SELECT generation FROM countdown_retired_keys WHERE key = ?", arguments: [key])
    }

    func append(_ event: EventRecord) throws {
        var event = event
        try event.insert(db)
    }

    func createConsumer(_ name: String, cursor: Int64, at wallMs: Int64) throws {
        try db.execute(
            sql: "INSERT INTO countdown_consumers (name, last_event_id, updated_at_ms) VALUES (?, ?, ?)",
            arguments: [name, cursor, wallMs])
    }

    func advanceConsumer(_ name: String, to id: Int64, at wallMs: Int64) throws {
        try db.execute(
            sql: """
                INSERT INTO countdown_consumers (name, last_event_id, updated_at_ms) VALUES (?1, ?2, ?3)
                ON CONFLICT (name) DO UPDATE SET last_event_id = max(last_event_id, ?2), updated_at_ms = ?3
                """,
            arguments: [name, id, wallMs])
    }

    func deleteItems(endedBefore cutoffMs: Int64) throws -> Int {
        try db.execute(
            sql: "DELETE FROM countdowns WHERE state IN ('expired', 'cancelled') AND ended_at_ms < ?",
            arguments: [cutoffMs])
        return db.changesCount
    }

    func deleteEvents(before cutoffMs: Int64) throws -> Int {
        try db.execute(
            sql: """
                DELETE FROM countdown_events
                WHERE at_ms < ? AND id <= coalesce((SELECT min(last_event_id) FROM countdown_consumers), 9223372036854775807)
                """,
            arguments: [cutoffMs])
        return db.changesCount
    }
}

/// A query of `countdowns` assembled from optional conditions: the SQL text and its arguments
/// grow together, so they cannot disagree.
private struct ItemQuery {
    private var sql: String
    private var arguments: StatementArguments

    init(_ condition: String, _ arguments: StatementArguments = []) {
        sql = "SELECT * FROM countdowns WHERE " + condition
        self.arguments = arguments
    }

    /// Adds `AND condition` with `value` as its argument, when there is a value.
    func and(_ condition: String, _ value: (some DatabaseValueConvertible)?) -> ItemQuery {
        guard let value else { return self }
        var query = self
        query.sql += " AND " + condition
        query.arguments += [value]
        return query
    }

    /// Adds a keyset condition on `(sort value, key)`, when there is a position to start after.
    func and(_ condition: String, _ position: SortPosition?) -> ItemQuery {
        guard let position else { return self }
        var query = self
        query.sql += " AND " + condition
        query.arguments += [position.value, position.key]
        return query
    }

    func fetch(_ db: Database, orderedBy order: String, limit: Int) throws -> [ItemRecord] {
        try ItemRecord.fetchAll(db, sql: sql + " ORDER BY \(order) LIMIT ?", arguments: arguments + [limit])
    }
}
