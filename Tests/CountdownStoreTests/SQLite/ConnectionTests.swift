import CSQLiteShim
import Foundation
import GRDB
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

@Suite("Connections and files")
struct ConnectionTests {
    @Test("Connections use WAL, a busy timeout, trusted_schema=OFF and defensive mode")
    func connectionSettings() async throws {
        let fixture = try Fixture()
        let store = try await fixture.open()
        let settings = try await store.grdb.write { db in
            (
                try String.fetchOne(db, sql: "PRAGMA journal_mode"),
                try Int.fetchOne(db, sql: "PRAGMA trusted_schema"),
                db.configuration.busyMode,
                try Int.fetchOne(db, sql: "PRAGMA synchronous")
            )
        }
        #expect(settings.0 == "wal")
        #expect(settings.1 == 0)
        // A busy handler of the store's own (polling every millisecond for up to the 10 s busy
        // timeout), not SQLite's backing-off one: `PRAGMA busy_timeout` reads 0 with it.
        if case .callback = settings.2 {} else { Issue.record("the store's busy handler is not installed") }
        #expect(settings.3 == 1, "synchronous = NORMAL")
        // Defensive mode refuses writes to the schema table even with writable_schema on.
        await #expect(throws: (any Error).self) {
            try await store.grdb.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA writable_schema = ON")
                try db.execute(sql: "UPDATE sqlite_master SET sql = 'garbage' WHERE name = 'countdowns'")
            }
        }
    }

    @Test(
        "A store that opens before anything else uses SQLite in the process turns off SQLite's count of allocated memory; later, SQLite keeps counting"
    )
    func memoryStatisticsOffWhenFirst() async throws {
        let fixture = try Fixture()
        let store = try await fixture.open()
        for index in 0..<50 { try await store.start("item-\(index)", duration: .seconds(60)) }
        _ = try await store.list()
        // The first call in the process (the store's opening, or another test's) decided it.
        let decided = countdown_skip_memory_statistics()
        var current: Int64 = -1
        var highest: Int64 = -1
        #expect(sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &current, &highest, 0) == SQLITE_OK)
        switch decided {
        case SQLITE_OK:
            #expect(current == 0 && highest == 0, "turned off, yet counted \(current) bytes")
        case SQLITE_MISUSE:
            #expect(current > 0, "SQLite was in use first and keeps counting")
        default:
            Issue.record("unexpected result \(decided)")
        }
        try await store.close()
    }

    @Test(
        "The store writes each commit's WAL frames together, through its own VFS; another connection sees every commit as soon as it returns, whole, at every size"
    )
    func walWritesGathered() async throws {
        let fixture = try Fixture()
        let store = try await fixture.open()
        let vfs = try await store.grdb.write { db -> String in
            var name: UnsafeMutablePointer<CChar>?
            let rc = sqlite3_file_control(db.sqliteConnection, "main", SQLITE_FCNTL_VFSNAME, &name)
            defer { sqlite3_free(name) }
            return rc == SQLITE_OK ? name.map { String(cString: $0) } ?? "" : "code \(rc)"
        }
        #expect(vfs.hasPrefix("countdown-wal/"), "\(vfs)")

        // A connection of the default VFS, as another process or the sqlite3 tool opens the file.
        let reader = try DatabaseQueue(path: fixture.path)
        defer { try? reader.close() }
        func stored() throws -> Int { try reader.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM countdowns") ?? -1 } }
        var expected = 0
        for index in 0..<40 {
            try await store.start("one-\(index)", duration: .minutes(5))
            expected += 1
            #expect(try stored() == expected, "after start \(index)")
        }
        // Commits of every size, from a few frames to far more than one write gathers (4 MiB):
        // each lands whole, and every page of the file reads back through the WAL.
        for (batch, size) in [1, 2, 7, 31, 32, 33, 64, 100, 257, 1_000, 4_000, 30_000].enumerated() {
            try await store.start((0..<size).map { .countdown("b\(batch)-\($0)", duration: .minutes(5), group: "g\($0 % 16)") })
            expected += size
            #expect(try stored() == expected, "after a batch of \(size)")
        }
        let (integrity, events) = try await reader.read { db in
            (try String.fetchAll(db, sql: "PRAGMA integrity_check"), try Int.fetchOne(db, sql: "SELECT count(*) FROM countdown_events"))
        }
        #expect(integrity == ["ok"])
        #expect(events == expected)
        try await store.close()
        let reopened = try CountdownStore(path: fixture.path, configuration: fixture.configuration)
        #expect(try await reopened.counts().total == expected)
        try await reopened.close()
    }

    @Test("Closing the store leaves everything in the database file itself")
    func closingCheckpointsTheWAL() async throws {
        let fixture = try Fixture()
        let store = try await fixture.open()
        try await store.start((0..<500).map { .countdown("k\($0)", duration: .minutes(5)) })
        try await store.close()
        let wal = (try? FileManager.default.attributesOfItem(atPath: fixture.path + "-wal")[.size] as? NSNumber)?.intValue ?? 0
        #expect(wal == 0)
        // A copy of the file alone holds every item.
        let copy = fixture.folder.path("copy.sqlite")
        try FileManager.default.copyItem(atPath: fixture.path, toPath: copy)
        let reopened = try CountdownStore(path: copy, configuration: fixture.configuration)
        #expect(try await reopened.counts().total == 500)
    }

    @Test("A new database file is created with mode 0600")
    func newFileIsPrivate() async throws {
        let fixture = try Fixture()
        _ = try await fixture.open()
        let attributes = try FileManager.default.attributesOfItem(atPath: fixture.path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
    }

    @Test("A text file at the path is refused and never overwritten")
    func textFileIsRefused() async throws {
        let fixture = try Fixture()
        let text = Data("these are my notes, not a database\n".utf8)
        try text.write(to: URL(fileURLWithPath: fixture.path))
        let error = await expectError(.unreadableDatabase) { try await fixture.open() }
        #expect(error?.message.contains(fixture.path) == true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: fixture.path)) == text)
    }

    @Test("A truncated database file is refused and never overwritten")
    func truncatedFileIsRefused() async throws {
        let fixture = try Fixture()
        do {
            let store = try await fixture.open()
            try await store.start([(0..<200).map { .countdown("k\($0)", duration: .minutes(5)) }].flatMap { $0 })
            try await store.close()
        }
        let whole = try Data(contentsOf: URL(fileURLWithPath: fixture.path))
        let truncated = whole.prefix(whole.count / 2 + 100)
        try truncated.write(to: URL(fileURLWithPath: fixture.path))
        do {
            let store = try await fixture.open()
            // Opening may succeed when the damage is past the schema; reading then fails cleanly.
            _ = try await store.active(limit: 1000)
        } catch let error as CountdownError {
            #expect(error.code == .unreadableDatabase || error.code == .ioFailure, "\(error)")
            #expect(error.message.contains(fixture.path), "the operation's error names the file: \(error)")
            #expect(error.underlyingError is DatabaseError, "SQLite's error is kept")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: fixture.path)) == truncated)
    }

    @Test("SQLite's busy timeout: the opening's options, else the one a configuration still carries (deprecated), else 10 s")
    func busyTimeoutComesFromTheOpening() async throws {
        let fixture = try Fixture()
        func timeout(_ store: CountdownStore) -> Duration? { (store.engine as? SQLiteEngine)?.busyTimeout }
        let plain = try CountdownStore(path: fixture.path, configuration: fixture.configuration)
        #expect(timeout(plain) == .seconds(10))
        try await plain.close()
        var carrying = fixture.configuration
        carrying.sqliteBusyTimeout = .milliseconds(700)  // what the deprecated `busyTimeout` sets
        let old = try CountdownStore(path: fixture.path, configuration: carrying)
        #expect(timeout(old) == .milliseconds(700))
        try await old.close()
        let given = try CountdownStore(path: fixture.path, configuration: carrying, sqlite: .init(busyTimeout: .seconds(3)))
        #expect(timeout(given) == .seconds(3), "the opening's options win")
        #expect(given.sqliteDatabase != nil)
        try await given.close()
    }

    @Test("A lock held past the busy timeout is databaseBusy, converted once: it names the file and keeps SQLite's error")
    func busyIsACodeWithThePathAndTheUnderlyingError() async throws {
        let fixture = try Fixture()
        let store = try CountdownStore(
            path: fixture.path, configuration: fixture.configuration, sqlite: .init(busyTimeout: .milliseconds(50)))
        try await store.start("k", duration: .minutes(5))
        var holding = GRDB.Configuration()
        holding.allowsUnsafeTransactions = true  // another process holding the write lock
        let other = try DatabaseQueue(path: fixture.path, configuration: holding)
        try await other.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") }
        let error = await expectError(.databaseBusy) { try await store.pause("k") }
        #expect(error?.message.contains(fixture.path) == true, "\(error?.message ?? "")")
        #expect((error?.underlyingError as? DatabaseError)?.resultCode == .SQLITE_BUSY)
        #expect(error?.code.category == .storage)
        try await other.writeWithoutTransaction { db in try db.execute(sql: "ROLLBACK") }
        try other.close()
        #expect(try await store.pause("k").state == .paused)
        try await store.close()
    }

    @Test("In a host's GRDB pool, checkpointWAL folds the log in and truncates it, also after close()")
    func checkpointWALOnAHostDatabase() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path("host.sqlite")
        let pool = try DatabasePool(path: path)
        let store = try CountdownStore(database: pool)
        try await store.start((0..<500).map { .countdown("k\($0)", duration: .minutes(5)) })
        let walPath = path + "-wal"
        func logSize() throws -> Int { (try FileManager.default.attributesOfItem(atPath: walPath)[.size] as? NSNumber)?.intValue ?? -1 }
        #expect(try logSize() > 0, "the writes are in the log")
        #expect(try await store.checkpointWAL())
        #expect(try logSize() == 0)
        // close() writes (the final heartbeat, the lease): the host's last checkpoint comes after it.
        _ = try await store.heartbeat()
        try await store.close()
        #expect(try logSize() > 0)
        #expect(try await store.checkpointWAL())
        #expect(try logSize() == 0)
        #expect(try await pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM countdowns") } == 500)
        try pool.close()
        // A store on a database without a log has nothing to fold in.
        let queue = try DatabaseQueue(path: folder.path("plain.sqlite"))
        #expect(try await CountdownStore(database: queue).checkpointWAL())
    }

    @Test("Another application's SQLite database is refused and left untouched")
    func foreignDatabaseIsRefused() async throws {
        let fixture = try Fixture()
        do {
            let queue = try DatabaseQueue(path: fixture.path)
            try await queue.write { db in try db.execute(sql: "CREATE TABLE invoices (id INTEGER PRIMARY KEY)") }
            try queue.close()
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: fixture.path))
        let error = await expectError(.foreignDatabase) { try await fixture.open() }
        #expect(error?.message.contains("invoices") == true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: fixture.path)) == before)
    }

    @Test("A host's own GRDB database can hold the countdown tables beside its own")
    func hostDatabaseHoldsTheTables() async throws {
        let folder = try TemporaryFolder()
        let pool = try DatabasePool(path: folder.path("app.sqlite"))
        try await pool.write { db in
            try db.execute(sql: "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
            try db.execute(sql: "INSERT INTO users (name) VALUES ('ada')")
        }
        let store = try CountdownStore(database: pool, configuration: .init(clock: VirtualClock()))
        try await store.start("user-1-cooldown", duration: .seconds(30))
        #expect(store.path == nil)
        #expect(try await store.countdown("user-1-cooldown")?.remaining == .seconds(30))
        let users = try await pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM users") }
        #expect(users == 1)
        try await store.close()
        // The host's database stays open for the host.
        #expect(try await pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM countdowns") } == 1)
    }

    @Test("Two store instances on one file writing at once never report a locked database")
    func twoInstancesWriteAtOnce() async throws {
        let fixture = try Fixture(clock: VirtualClock())
        let first = try CountdownStore(path: fixture.path, configuration: .init())
        let second = try CountdownStore(path: fixture.path, configuration: .init())
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (name, store) in [("a", first), ("b", second)] {
                group.addTask {
                    for index in 0..<150 {
                        try await store.start("\(name)-\(index)", duration: .minutes(10))
                        if index.isMultiple(of: 3) { try await store.pause("\(name)-\(index)") }
                        if index.isMultiple(of: 10) { try await store.heartbeat() }
                    }
                }
                group.addTask {
                    try await store.start((0..<100).map { .countdown("\(name)-bulk-\($0)", duration: .minutes(5)) })
                }
            }
            try await group.waitForAll()
        }
        let counts = try await first.counts()
        #expect(counts.total == 500)
        #expect(counts.count(.paused) == 100)
        let integrity = try await first.grdb.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") }
        #expect(integrity == "ok")
    }

    @Test("Regression: operations right after a task awaited GRDB's own asynchronous access do not trap")
    func operationsAfterGRDBAsynchronousAccess() async throws {
        // A task that awaited GRDB's asynchronous `write` may go on running on the connection's
        // own queue; GRDB's non-reentrant synchronous methods trap there (the ticker's
        // data_version check used to be such an await, and crashed processes under load).
        let fixture = try Fixture()
        let store = try await fixture.open()
        for index in 0..<300 {
            try await store.grdb.write { db in try db.execute(sql: "SELECT 1") }
            try await store.start("k\(index)", duration: .seconds(60))
            try await store.grdb.read { db in _ = try Int.fetchOne(db, sql: "SELECT 1") }
            try await store.heartbeat()
            _ = try await store.active(limit: 5)
        }
        #expect(try await store.counts().count(.running) == 300)
    }
}
