import CSQLiteShim
import Foundation
import GRDB

/// The repository on an SQLite database through GRDB.
///
/// Transactions run on the calling thread (GRDB's synchronous access, which takes the
/// connection's serial queue without a thread switch): an operation costs its SQL, not two
/// thread hand-offs. A write first tries to take SQLite's write lock without waiting; only when
/// another connection holds it does the write move to GRDB's queue and wait there (up to the busy
/// timeout) without blocking the caller's thread.
struct SQLiteRepository: CountdownRepository {
    let writer: any DatabaseWriter

    func read<T: Sendable>(_ body: @escaping @Sendable (any RepositoryReading) throws -> T) async throws -> T {
        try await translatingErrors { try readNow(body) }
    }

    /// The synchronous read: on the calling thread, in one deferred transaction (one snapshot).
    private func readNow<T>(_ body: (any RepositoryReading) throws -> T) throws -> T {
        try writer.unsafeReentrantRead { db in
            if db.isInsideTransaction { return try body(SQLiteTransaction(db: db)) }
            try db.cachedStatement(sql: "BEGIN DEFERRED").execute()
            do {
                let value = try body(SQLiteTransaction(db: db))
                try db.cachedStatement(sql: "COMMIT").execute()
                return value
            } catch {
                if db.isInsideTransaction { try? db.rollback() }
                throw error
            }
        }
    }

    /// The synchronous attempt at a write: on the calling thread, `nil` when the lock is busy.
    private func writeNow<T: Sendable>(_ body: (any RepositoryWriting) throws -> T) throws -> Outcome<T>? {
        try writer.writeWithoutTransaction { db in try Self.transaction(db, waitingForLock: false, body) }
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (any RepositoryWriting) throws -> T) async throws -> T {
        try await translatingErrors {
            if let immediate = try writeNow(body) { return immediate.value }
            return try await writer.writeWithoutTransaction { db in
                guard let result = try Self.transaction(db, waitingForLock: true, body) else {
                    throw DatabaseError(resultCode: .SQLITE_BUSY, message: "database is locked")
                }
                return result.value
            }
        }
    }

    /// A value returned out of a transaction (a box, so that an optional `T` stays distinct from
    /// "the lock was busy").
    private struct Outcome<T: Sendable>: Sendable {
        var value: T
    }

    /// Runs `body` in a `BEGIN IMMEDIATE` transaction and commits it. Without `waitingForLock`,
    /// returns `nil` at once when another connection holds the write lock, having changed nothing.
    private static func transaction<T: Sendable>(
        _ db: Database, waitingForLock: Bool, _ body: (any RepositoryWriting) throws -> T
    ) throws -> Outcome<T>? {
        if !waitingForLock {
            switch db.configuration.busyMode {
            case .immediateError:
                break
            case .timeout(let seconds):
                // Try the lock without waiting, then give the connection its timeout back.
                sqlite3_busy_timeout(db.sqliteConnection, 0)
                defer { sqlite3_busy_timeout(db.sqliteConnection, CInt(seconds * 1000)) }
                do {
                    try db.cachedStatement(sql: "BEGIN IMMEDIATE").execute()
                } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY {
                    return nil
                }
            case .callback:
                return nil  // a handler this code cannot restore: wait on GRDB's queue instead
            }
        }
        if !db.isInsideTransaction { try db.cachedStatement(sql: "BEGIN IMMEDIATE").execute() }
        do {
            let value = try body(SQLiteTransaction(db: db))
            try db.cachedStatement(sql: "COMMIT").execute()
            return Outcome(value: value)
        } catch {
            if db.isInsideTransaction { try? db.rollback() }
            throw error
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
///
/// Every statement is prepared once per connection and reused (GRDB's statement cache), and
/// rows decode by column position: an operation costs little more than its SQL.
struct SQLiteTransaction: RepositoryWriting {
    let db: Database

    private func statement(_ sql: String) throws -> Statement {
        try db.cachedStatement(sql: sql)
    }

    private func execute(_ sql: String, _ arguments: StatementArguments = []) throws {
        try statement(sql).execute(arguments: arguments)
    }

    // MARK: Reading

    func checkpoint() throws -> Checkpoint? {
        let sql = """
            SELECT created_at_ms, active_ms, gap_ms, heartbeat_at_ms, heartbeat_boot_ms, boot_id, wall_floor_ms,
                suspended, calibration_offset_ms, calibrated_at_ms, clock_skew_ms
            FROM countdown_clock WHERE id = 1
            """
        guard let row = try Row.fetchOne(try statement(sql)) else { return nil }
        return Checkpoint(
            createdAt: try row.decode(atIndex: 0), active: try row.decode(atIndex: 1), gap: try row.decode(atIndex: 2),
            heartbeatAt: try row.decode(atIndex: 3), heartbeatBoot: try row.decode(atIndex: 4),
            bootID: try row.decode(atIndex: 5), wallFloor: try row.decode(atIndex: 6),
            suspended: try row.decode(atIndex: 7), calibrationOffset: try row.decode(atIndex: 8),
            calibratedAt: try row.decode(atIndex: 9), clockSkew: try row.decode(atIndex: 10))
    }

    func lease() throws -> Lease {
        let sql = "SELECT holder, acquired_at_ms, expires_at_ms FROM countdown_lease WHERE id = 1"
        guard let row = try Row.fetchOne(try statement(sql)) else {
            return Lease(holder: nil, acquiredAtMs: nil, expiresAtMs: 0)
        }
        return Lease(holder: try row.decode(atIndex: 0), acquiredAtMs: try row.decode(atIndex: 1), expiresAtMs: try row.decode(atIndex: 2))
    }

    func item(key: String) throws -> ItemRecord? {
        try ItemRecord.fetchOne(try statement(ItemRecord.select + " WHERE key = ?"), arguments: [key])
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
            try statement(
                ItemRecord.select + " WHERE state = 'running' AND deadline_ms IS NOT NULL AND policy = ? ORDER BY deadline_ms LIMIT 1"),
            arguments: [policy.rawValue])
    }

    func counts() throws -> [CountRow] {
        try Row.fetchAll(
            try statement("SELECT state, group_name, count(*) AS n FROM countdowns GROUP BY state, group_name")
        ).compactMap { row in
            guard let state = CountdownState(rawValue: try row.decode(atIndex: 0)) else { return nil }
            return CountRow(state: state, group: try row.decode(atIndex: 1), count: try row.decode(atIndex: 2))
        }
    }

    func events(afterID: Int64, limit: Int) throws -> [EventRecord] {
        try EventRecord.fetchAll(
            try statement(EventRecord.select + " WHERE id > ? ORDER BY id LIMIT ?"), arguments: [afterID, limit])
    }

    func lastEventID() throws -> Int64 {
        try Int64.fetchOne(try statement("SELECT coalesce(max(id), 0) FROM countdown_events")) ?? 0
    }

    func ended(_ state: CountdownState, group: String?, limit: Int) throws -> [ItemRecord] {
        try ItemQuery("state = ?", [state.rawValue])
            .and("group_name = ?", group)
            .fetch(db, orderedBy: "ended_at_ms DESC, key", limit: limit)
    }

    func recentEvents(kinds: [String]?, limit: Int) throws -> [EventRecord] {
        guard let kinds else {
            return try EventRecord.fetchAll(try statement(EventRecord.select + " ORDER BY id DESC LIMIT ?"), arguments: [limit])
        }
        let marks = Array(repeating: "?", count: kinds.count).joined(separator: ",")
        return try EventRecord.fetchAll(
            db, sql: EventRecord.select + " WHERE kind IN (\(marks)) ORDER BY id DESC LIMIT ?",
            arguments: StatementArguments(kinds) + [limit])
    }

    func items(keys: [String]) throws -> [ItemRecord] {
        var items: [ItemRecord] = []
        for start in stride(from: 0, to: keys.count, by: 500) {
            let chunk = Array(keys[start..<min(start + 500, keys.count)])
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            items += try ItemRecord.fetchAll(
                db, sql: ItemRecord.select + " WHERE key IN (\(marks))", arguments: StatementArguments(chunk))
        }
        return items
    }

    func activeItems(group: String?, limit: Int) throws -> [ItemRecord] {
        if let group {
            return try ItemRecord.fetchAll(
                try statement(ItemRecord.select + " WHERE state IN ('running', 'paused') AND group_name = ? LIMIT ?"),
                arguments: [group, limit])
        }
        return try ItemRecord.fetchAll(
            try statement(ItemRecord.select + " WHERE state IN ('running', 'paused') LIMIT ?"), arguments: [limit])
    }

    func consumerCursor(_ name: String) throws -> Int64? {
        try Int64.fetchOne(try statement("SELECT last_event_id FROM countdown_consumers WHERE name = ?"), arguments: [name])
    }

    // MARK: Writing

    func save(_ checkpoint: Checkpoint, creating: Bool) throws {
        let verb = creating ? "INSERT OR IGNORE INTO" : "REPLACE INTO"
        try execute(
            """
            \(verb) countdown_clock (id, created_at_ms, active_ms, gap_ms, heartbeat_at_ms, heartbeat_boot_ms,
                boot_id, wall_floor_ms, suspended, calibration_offset_ms, calibrated_at_ms, clock_skew_ms)
            VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                checkpoint.createdAt, checkpoint.active, checkpoint.gap, checkpoint.heartbeatAt,
                checkpoint.heartbeatBoot, checkpoint.bootID, checkpoint.wallFloor, checkpoint.suspended,
                checkpoint.calibrationOffset, checkpoint.calibratedAt, checkpoint.clockSkew,
            ])
    }

    func save(_ lease: Lease) throws {
        try execute(
            "UPDATE countdown_lease SET holder = ?, acquired_at_ms = ?, expires_at_ms = ? WHERE id = 1",
            [lease.holder, lease.acquiredAtMs, lease.expiresAtMs])
    }

    func insert(_ item: inout ItemRecord) throws {
        try execute(ItemRecord.insertSQL, item.arguments)
        item.id = db.lastInsertedRowID
    }

    func update(_ item: ItemRecord) throws {
        try execute(ItemRecord.updateSQL, item.arguments)
    }

    func delete(_ item: ItemRecord) throws {
        try execute("DELETE FROM countdowns WHERE id = ?", [item.id])
        try execute(
            """
            INSERT INTO countdown_retired_keys (key, generation, removed_at_ms) VALUES (?1, ?2, ?3)
            ON CONFLICT (key) DO UPDATE SET generation = max(generation, ?2), removed_at_ms = ?3
            """,
            [item.key, item.generation, item.updatedAtMs])
    }

    func retiredGeneration(key: String) throws -> Int64? {
        try Int64.fetchOne(try statement("SELECT generation FROM countdown_retired_keys WHERE key = ?"), arguments: [key])
    }

    func append(_ event: EventRecord) throws {
        try execute(EventRecord.insertSQL, event.arguments)
    }

    func createConsumer(_ name: String, cursor: Int64, at wallMs: Int64) throws {
        try execute(
            "INSERT INTO countdown_consumers (name, last_event_id, updated_at_ms) VALUES (?, ?, ?)", [name, cursor, wallMs])
    }

    func advanceConsumer(_ name: String, to id: Int64, at wallMs: Int64) throws {
        try execute(
            """
            INSERT INTO countdown_consumers (name, last_event_id, updated_at_ms) VALUES (?1, ?2, ?3)
            ON CONFLICT (name) DO UPDATE SET last_event_id = max(last_event_id, ?2), updated_at_ms = ?3
            """,
            [name, id, wallMs])
    }

    func deleteItems(endedBefore cutoffMs: Int64) throws -> Int {
        try execute("DELETE FROM countdowns WHERE state IN ('expired', 'cancelled') AND ended_at_ms < ?", [cutoffMs])
        return db.changesCount
    }

    func deleteEvents(before cutoffMs: Int64) throws -> Int {
        try execute(
            """
            DELETE FROM countdown_events
            WHERE at_ms < ? AND id <= coalesce((SELECT min(last_event_id) FROM countdown_consumers), 9223372036854775807)
            """,
            [cutoffMs])
        return db.changesCount
    }
}

/// A query of `countdowns` assembled from optional conditions: the SQL text and its arguments
/// grow together, so they cannot disagree. Each combination of conditions is one cached statement.
private struct ItemQuery {
    private var sql: String
    private var arguments: StatementArguments

    init(_ condition: String, _ arguments: StatementArguments = []) {
        sql = ItemRecord.select + " WHERE " + condition
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
        try ItemRecord.fetchAll(
            try db.cachedStatement(sql: sql + " ORDER BY \(order) LIMIT ?"), arguments: arguments + [limit])
    }
}
