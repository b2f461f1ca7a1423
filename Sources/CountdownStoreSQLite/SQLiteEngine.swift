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
struct SQLiteEngine: StorageEngine, UpkeepEngine {
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

    /// A pause between two batches, with no transaction open: other processes' writers take
    /// SQLite's write lock in it, and so do this process's own (a consumer claiming the
    /// expiries the batch before just recorded, a request's write), which would otherwise
    /// wait for the pause, and for the other processes' writes after it, before their first
    /// statement, so that the first expiries of a backlog reached their consumer only after the
    /// first pause and whatever other processes wrote in it. Then the writers of other processes
    /// that say they wait go first (see ``leaveWritesToOthers(for:waitingAtMost:)``).
    func leaveWritesToOthers(for pause: Duration) async {
        await leaveWritesToOthers(for: pause, waitingAtMost: Self.othersWaitBound)
    }

    /// ``leaveWritesToOthers(for:)``, going on for writers of other processes that say they wait
    /// for the write lock for at most `bound` after the pause, holding this connection's queue
    /// meanwhile (a write of this process would take the lock before them).
    func leaveWritesToOthers(for pause: Duration, waitingAtMost bound: Duration) async {
        if pause > .zero { try? await Task.sleep(for: pause) }
        _ = try? await writer.writeWithoutTransaction { db in
            // Writers of other processes that say they wait (see shim.c) go first, for a
            // bounded time: each got the lock in the pause, or gets it as the one before ends.
            let bound = ContinuousClock.now + bound
            while countdown_writers_waiting(db.sqliteConnection, 1) == 1, ContinuousClock.now < bound {
                usleep(250)
            }
        }
    }

    /// How long a pause between a backlog's batches may go on for other processes' writers that
    /// wait for the write lock, at most.
    static let othersWaitBound = Duration.milliseconds(50)

    func appliedMigrations() async throws -> [String] {
        try await writer.read { db in try SQLiteMigrator.applied(db) }
    }

    var knownMigrations: [String] { Migration.embedded.map(\.name) }

    func integrityCheck(quick: Bool) async throws -> [String] {
        try await writer.read { db in
            try String.fetchAll(db, sql: quick ? "PRAGMA quick_check" : "PRAGMA integrity_check")
        }
    }

    /// Folds the write-ahead log into the database and truncates it; whether all of it was.
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
    private func writeNow<T: Sendable>(_ body: (any RepositoryWriting) throws -> TransactionEnd<T>) throws -> Outcome<
        T
    >? {
        try writer.unsafeReentrantWrite { db in
            try Self.transaction(db, waitingForLock: false, busyTimeout: busyTimeout, body)
        }
    }

    func write<T: Sendable>(
        _ body: @escaping @Sendable (any RepositoryWriting) throws -> TransactionEnd<T>
    ) async throws -> T {
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
        // While it waits, the writer says so to the other processes' tickers, which let it in
        // between their batches rather than leave it to catch a short gap (see shim.c).
        var waits = false
        if case .callback = db.configuration.busyMode, countdown_writers_waiting(db.sqliteConnection, 0) == 1 {
            // Others wait already: go behind them. Taking the lock the moment it is free would
            // leave a writer that polls for it waiting for as long as this one keeps writing.
            waits = countdown_writer_waits(db.sqliteConnection, 1) == 1
            usleep(1000)
        }
        defer {
            if case .timeout(let seconds) = db.configuration.busyMode {
                sqlite3_busy_timeout(db.sqliteConnection, CInt(seconds * 1000))
            }
            if waits { _ = countdown_writer_waits(db.sqliteConnection, 0) }
        }
        while true {
            do {
                return try attempt()
            } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY && ContinuousClock.now < deadline
            {
                if !waits { waits = countdown_writer_waits(db.sqliteConnection, 1) == 1 }
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
        _ db: Database, waitingForLock: Bool, busyTimeout: Duration,
        _ body: (any RepositoryWriting) throws -> TransactionEnd<T>
    ) throws -> Outcome<T>? {
        // Already inside a transaction (the host's): the work joins it in a savepoint, which
        // `body` may roll back, and the host commits.
        if db.isInsideTransaction {
            var end: TransactionEnd<T>?
            try db.inSavepoint {
                let ended = try body(SQLiteTransaction(db: db))
                end = ended
                return ended.commits ? .commit : .rollback
            }
            guard let end else { throw DatabaseError(resultCode: .SQLITE_ERROR, message: "a savepoint ended unrun") }
            return Outcome(value: end.value)
        }
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
                // Writers of other processes wait for the lock: queue behind them rather than
                // take it from under them (see beginImmediate).
                if countdown_writers_waiting(db.sqliteConnection, 0) == 1 { return nil }
                do {
                    try BusyWait.failingFast { try db.cachedStatement(sql: "BEGIN IMMEDIATE").execute() }
                } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY {
                    return nil
                }
            }
        }
        if !db.isInsideTransaction { try beginImmediate(db, busyTimeout: busyTimeout) }
        do {
            let end = try body(SQLiteTransaction(db: db))
            guard end.commits else {
                try db.cachedStatement(sql: "ROLLBACK").execute()
                return Outcome(value: end.value)
            }
            CrashPoints.reach(.commitBefore)
            try db.cachedStatement(sql: "COMMIT").execute()
            CrashPoints.reach(.commitAfter)
            return Outcome(value: end.value)
        } catch {
            if db.isInsideTransaction { try? db.rollback() }
            throw error
        }
    }
}
