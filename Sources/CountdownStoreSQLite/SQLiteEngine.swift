import CountdownStoreCore
import CountdownStoreSQL
import CSQLiteShim
import Foundation
import GRDB

/// The repository on an SQLite database through GRDB.
///
/// Transactions run on the calling thread (GRDB's synchronous access, which takes the
/// connection's serial queue without a thread switch): an operation costs its SQL, not two
/// thread hand-offs. The reentrant entry points are used because a task that awaited one of
/// GRDB's asynchronous methods may go on running on the connection's own queue, where GRDB's
/// other synchronous methods trap. A write first tries to take SQLite's write lock without
/// waiting; only when another connection holds it does the write move to GRDB's queue and wait
/// there (up to the busy timeout) without blocking the caller's thread.
struct SQLiteEngine: StorageEngine {
    let writer: any DatabaseWriter
    /// The database file when the store opened it itself; `nil` for a host's database.
    let path: String?
    /// The settings a second connection to the file needs (the WAL checkpointer's).
    let busyTimeout: Duration
    let durability: CountdownStore.Durability

    /// Opens the engine on `writer`, brings the schema up to date and, for a new store, writes
    /// its first clock row.
    init(
        writer: any DatabaseWriter, path: String?, busyTimeout: Duration, durability: CountdownStore.Durability,
        clock: any StoreClock
    ) throws {
        self.writer = writer
        self.path = path
        self.busyTimeout = busyTimeout
        self.durability = durability
        try SQLiteMigrator().migrate(writer)
        // Reentrant: a host may open the store from a task that just awaited its own database.
        let exists = try writer.unsafeReentrantRead { db in try SQLiteTransaction(db: db).checkpoint() != nil }
        if !exists { try Self.startClocks(writer, path: path, clock: clock) }
    }

    /// Writes a new store's first `countdown_clock` row (see ``FirstClockRow``), under the write lock.
    private static func startClocks(_ database: any DatabaseWriter, path: String?, clock: any StoreClock) throws {
        try database.unsafeReentrantWrite { db in
            try db.inTransaction(.immediate) {
                let wrote = try FirstClockRow.write(
                    SQLiteTransaction(db: db), place: path.map { quoted($0, limit: 200) },
                    reading: { ClockReading(clock) })
                guard wrote else { return .rollback }
                CrashPoints.reach(.firstClockBeforeCommit)
                return .commit
            }
            CrashPoints.reach(.firstClockAfterCommit)
        }
    }

    /// SQLite's `data_version` on the writing connection: it changes when another connection
    /// (another process) commits. On the calling thread, like every transaction here.
    func foreignChangeToken() throws -> Int {
        try writer.unsafeReentrantWrite { db in
            try db.first("PRAGMA data_version") { Int(try $0.int(0)) } ?? 0
        }
    }

    func startUpkeep() throws -> (any EngineUpkeep)? {
        guard let path else { return nil }  // a host's database keeps the host's settings
        return try WALCheckpointer.start(for: self, path: path)
    }

    /// Holds this connection's queue, with no transaction open, for `pause`: a write of this
    /// process (a consumer's acknowledgement beside the ticker) would otherwise take SQLite's
    /// write lock in the pause meant for other processes.
    func leaveWritesToOthers(for pause: Duration) async {
        let microseconds = useconds_t(max(0, pause.milliseconds) * 1000)
        _ = try? await writer.writeWithoutTransaction { _ in usleep(microseconds) }
    }

    func appliedMigrations() async throws -> [String] {
        try await writer.read { db in try SQLiteMigrator.applied(db) }
    }

    var knownMigrations: [String] { Migration.embedded.map(\.name) }

    func integrityCheck(quick: Bool) async throws -> [String] {
        try await writer.read { db in
            try String.fetchAll(db, sql: quick ? "PRAGMA quick_check" : "PRAGMA integrity_check")
        }
    }

    func checkpointLog() async throws -> Bool {
        try await writer.writeWithoutTransaction { db in
            guard try String.fetchOne(db, sql: "PRAGMA journal_mode") == "wal" else { return true }
            do {
                let (log, folded) = try db.checkpoint(.truncate)
                return log == 0 || log == folded
            } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY {
                return false  // a reader kept part of the log in use
            }
        }
    }

    func close() throws {
        guard path != nil else { return }  // the host's database: the host closes it
        CrashPoints.reach(.closeBeforeCheckpoint)
        // No checkpoint of its own: SQLite folds the WAL into the database file and removes it
        // when the last connection to the file closes (it takes the file's exclusive lock
        // without waiting to know it is the last), so the file alone then holds everything.
        // While other processes still have the file open, the WAL stays theirs, just as
        // durable; a process that only ran one command (`countdown show` beside a busy ticker)
        // would otherwise copy megabytes of someone else's writes and wait for a disk sync
        // before it could exit. The ticker's checkpointer folds the WAL in while it runs.
        CrashPoints.reach(.closeAfterCheckpoint)
        try writer.close()
        CrashPoints.reach(.closed)
    }

    // Failures are thrown as they come: the store converts them once, naming its file.
    func read<T: Sendable>(_ body: @escaping @Sendable (any RepositoryReading) throws -> T) async throws -> T {
        try readNow(body)
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
        try writer.unsafeReentrantWrite { db in
            try Self.transaction(db, waitingForLock: false, busyTimeout: busyTimeout, body)
        }
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (any RepositoryWriting) throws -> T) async throws -> T {
        if let immediate = try writeNow(body) { return immediate.value }
        return try await writer.writeWithoutTransaction { db in
            guard let result = try Self.transaction(db, waitingForLock: true, busyTimeout: busyTimeout, body) else {
                throw DatabaseError(resultCode: .SQLITE_BUSY, message: "database is locked")
            }
            return result.value
        }
    }

    /// How long one attempt at the write lock waits, at most, on a host's connection with a
    /// busy timeout, while a write waits its turn.
    static let lockWaitSliceMs: CInt = 50

    /// `BEGIN IMMEDIATE`, waiting up to the busy timeout for another connection's write lock, in
    /// short attempts: SQLite's busy handler does not heed an interrupt, but GRDB refuses the
    /// next attempt of a cancelled task (with `CancellationError`), so a write whose task is
    /// cancelled (a stop giving up on it) stops waiting within one attempt instead of the whole
    /// busy timeout. The store's own connections try every millisecond, as their busy handler
    /// would (it fails at once during each attempt); a host's connection with a busy timeout
    /// waits up to ``lockWaitSliceMs`` per attempt; any other just begins.
    private static func beginImmediate(_ db: Database, busyTimeout: Duration) throws {
        let begin = { try db.cachedStatement(sql: "BEGIN IMMEDIATE").execute() }
        let deadline: ContinuousClock.Instant
        let attempt: () throws -> Void
        switch db.configuration.busyMode {
        case .callback where db.configuration.label == DatabaseOpening.connectionLabel:
            deadline = ContinuousClock.now + busyTimeout
            attempt = {
                do {
                    try BusyWait.failingFast(begin)
                } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY {
                    usleep(1000)
                    throw error
                }
            }
        case .timeout(let seconds) where seconds > 0:
            deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
            sqlite3_busy_timeout(db.sqliteConnection, lockWaitSliceMs)
            attempt = begin
        default:
            return try begin()
        }
        defer {
            if case .timeout(let seconds) = db.configuration.busyMode {
                sqlite3_busy_timeout(db.sqliteConnection, CInt(seconds * 1000))
            }
        }
        while true {
            do {
                return try attempt()
            } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY && ContinuousClock.now < deadline
            {
                continue
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
        _ db: Database, waitingForLock: Bool, busyTimeout: Duration, _ body: (any RepositoryWriting) throws -> T
    ) throws -> Outcome<T>? {
        // Already inside a transaction (the host's): the work joins it, and the host commits.
        if db.isInsideTransaction { return Outcome(value: try body(SQLiteTransaction(db: db))) }
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
                // The store's own handler fails at once on this thread while asked to; a host's
                // handler is its own: wait on GRDB's queue instead.
                guard db.configuration.label == DatabaseOpening.connectionLabel else { return nil }
                do {
                    try BusyWait.failingFast { try db.cachedStatement(sql: "BEGIN IMMEDIATE").execute() }
                } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY {
                    return nil
                }
            }
        }
        if !db.isInsideTransaction { try beginImmediate(db, busyTimeout: busyTimeout) }
        do {
            let value = try body(SQLiteTransaction(db: db))
            CrashPoints.reach(.commitBefore)
            try db.cachedStatement(sql: "COMMIT").execute()
            CrashPoints.reach(.commitAfter)
            return Outcome(value: value)
        } catch {
            if db.isInsideTransaction { try? db.rollback() }
            throw error
        }
    }
}

extension DatabaseError: StorageFailure {
    /// SQLite's failure as a ``CountdownError``: its result code decides the error's code.
    package func countdownError(place: String) -> CountdownError {
        let detail = message ?? "\(resultCode)"
        switch resultCode {
        case .SQLITE_NOTADB, .SQLITE_CORRUPT:
            return CountdownError(
                .unreadableDatabase,
                "the file\(place) is not a readable SQLite database (\(detail)); it was left untouched",
                underlying: self)
        case .SQLITE_FULL:
            return CountdownError(.diskFull, "disk full writing the database\(place): \(detail)", underlying: self)
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            return CountdownError(
                .databaseBusy, "the database\(place) stayed locked by another process: \(detail)", underlying: self)
        case .SQLITE_IOERR, .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_READONLY:
            return CountdownError(
                .ioFailure, "could not read or write the database\(place): \(detail) (\(resultCode))", underlying: self)
        default:
            return CountdownError(
                .storageFailure, "storage failure\(place): \(detail) (\(resultCode))", underlying: self)
        }
    }
}

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

    func item(key: String) throws -> ItemRecord? {
        try db.first(ItemRecord.select + " WHERE key = ?", bind: { $0.add(key) }, { try ItemRecord(row: $0) })
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

    func events(afterID: Int64, limit: Int) throws -> [EventRecord] {
        try db.all(
            EventRecord.select + " WHERE id > ? ORDER BY id LIMIT ?",
            bind: {
                $0.add(afterID); $0.add(limit)
            }, { try EventRecord(row: $0) })
    }

    func lastEventID() throws -> Int64 {
        try db.first("SELECT coalesce(max(id), 0) FROM countdown_events") { try $0.int(0) } ?? 0
    }

    func recentEvents(kinds: [String]?, limit: Int) throws -> [EventRecord] {
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

    func recentEvents(key: String, window: Int, limit: Int) throws -> [EventRecord] {
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
        try db.run(ItemRecord.insertNewSQL, bind: item.bind)
        guard db.changesCount == 1 else { return false }
        item.id = db.lastInsertedRowID
        return true
    }

    func update(_ item: ItemRecord) throws {
        try db.run(ItemRecord.updateSQL, bind: item.bind)
    }

    func recordExpiries(_ items: [ItemRecord], events: [EventRecord]) throws {
        // Each statement looked up once for the batch: the lookup hashes its whole text.
        let update = try db.cachedStatement(sql: ItemRecord.updateSQL)
        for item in items { try db.run(update, bind: item.bind) }
        let insert = try db.cachedStatement(sql: EventRecord.insertSQL)
        for event in events { try db.run(insert, bind: event.bind) }
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
        try db.run(EventRecord.insertSQL, bind: event.bind)
    }

    func createConsumer(_ name: String, cursor: Int64, at wallMs: Int64) throws {
        try db.run(
            "INSERT INTO countdown_consumers (name, last_event_id, updated_at_ms) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING"
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
                ON CONFLICT (key) DO UPDATE SET generation = max(generation, excluded.generation), removed_at_ms = excluded.removed_at_ms
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
