import Foundation
import GRDB
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite
@testable import CountdownStorePostgres

/// A fresh folder per test, removed when the test's value goes away.
final class TemporaryFolder: Sendable {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("CountdownStoreTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String = "store.sqlite") -> String {
        url.appendingPathComponent(name).path
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}

/// A store on a fresh file (or, on PostgreSQL, a fresh schema) with a virtual clock.
struct Fixture {
    let folder: TemporaryFolder
    let clock: VirtualClock
    var configuration: CountdownStore.Configuration
    let engine: TestEngine
    /// The PostgreSQL schema of this fixture's store.
    let schema = PostgresFixtures.newSchema()

    init(clock: VirtualClock = VirtualClock(), engine: TestEngine = .sqlite) throws {
        folder = try TemporaryFolder()
        self.clock = clock
        self.engine = engine
        configuration = CountdownStore.Configuration(clock: clock)
        configuration.stopTimeout = Self.stopTimeout
    }

    /// How long a test's stop waits for the final writes: as long as a machine under load may
    /// take, so that what a test reads after a stop is what the stop wrote. The tests of stopping
    /// against a database that does not answer keep the default bound.
    static let stopTimeout: Duration = .seconds(60)

    var path: String { folder.path() }

    /// Opens the store (again) on the same file or schema; with `clock`, as a host on that clock.
    func open(clock: VirtualClock? = nil) async throws -> CountdownStore {
        var configuration = configuration
        if let clock { configuration.clock = clock }
        return try await engine.open(self, configuration)
    }

    /// Opens the store and makes it the lease holder, as a running ticker would.
    func openTicking() async throws -> CountdownStore {
        let store = try await open()
        try await store.heartbeat()
        return store
    }
}

/// Lets `duration` pass in steps of at most one heartbeat interval, heartbeating after each,
/// as a running ticker would.
func run(_ store: CountdownStore, _ clock: VirtualClock, for duration: Duration, step: Duration = .seconds(1)) async throws {
    var left = duration
    while left > .zero {
        let next = min(step, left)
        clock.advance(by: next)
        left -= next
        try await store.heartbeat()
    }
}

/// Expects `body` to throw a ``CountdownError`` with `code`; returns it.
@discardableResult
func expectError<T>(
    _ code: CountdownError.Code, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> T
) async -> CountdownError? {
    do {
        _ = try await body()
        Issue.record("expected \(code), nothing was thrown", sourceLocation: sourceLocation)
        return nil
    } catch let error as CountdownError {
        #expect(error.code == code, "\(error.message)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// Runs `refused` against a store holding one item and checks it threw `code` and changed nothing.
func expectRefused(
    _ code: CountdownError.Code, naming fragment: String? = nil,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ refused: @escaping (CountdownStore) async throws -> Void
) async throws {
    let fixture = try Fixture()
    let store = try await fixture.openTicking()
    try await store.start("existing", duration: .minutes(5), payload: .text("p"))
    let before = try await snapshot(store)
    fixture.clock.advance(by: .milliseconds(250))
    let error = await expectError(code, sourceLocation: sourceLocation) { try await refused(store) }
    if let fragment, let error {
        #expect(error.message.contains(fragment), "\(error.message) names \(fragment)", sourceLocation: sourceLocation)
    }
    #expect(try await snapshot(store) == before, "nothing was written", sourceLocation: sourceLocation)
}

/// Every row of every countdown table, for proving that refused input changed nothing.
func snapshot(_ store: CountdownStore) async throws -> [String] {
    if let engine = store.engine as? PostgresEngine, let schema = engine.schema {
        return try await PostgresFixtures.snapshot(schema: schema)
    }
    return try await store.grdb.read { db in
        var lines: [String] = []
        for table in ["countdowns", "countdown_clock", "countdown_lease", "countdown_events", "countdown_consumers", "countdown_migrations"] {
            for row in try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY rowid") {
                lines.append("\(table): \(row)")
            }
        }
        return lines
    }
}

/// One row of `countdown_events`, as the tests read it.
struct EventRow: Sendable, Hashable {
    var kind: String
    var key: String?
    var generation: Int64?
    var deadlineAtMs: Int64?
    var firedAtMs: Int64?
    var lateMs: Int64?
    var detail: String?
}

/// The events recorded, oldest first, optionally only for `key` and of `kind`.
func events(_ store: CountdownStore, key: String? = nil, kind: String? = nil) async throws -> [EventRow] {
    if store.engine is PostgresEngine {
        return try await store.engine.readEvents { tx in
            try tx.events(afterID: 0, limit: Int(Int32.max)).filter { event in
                (key == nil || event.key == key) && (kind == nil || event.kind == kind)
            }.map { event in
                EventRow(
                    kind: event.kind, key: event.key, generation: event.generation, deadlineAtMs: event.deadlineAtMs,
                    firedAtMs: event.firedAtMs, lateMs: event.lateMs, detail: event.detail)
            }
        }
    }
    return try await store.grdb.read { db in
        try Row.fetchAll(
            db,
            sql: """
                SELECT * FROM countdown_events
                WHERE (?1 IS NULL OR key = ?1) AND (?2 IS NULL OR kind = ?2) ORDER BY id
                """,
            arguments: [key, kind]
        ).map { row in
            EventRow(
                kind: row["kind"], key: row["key"], generation: row["generation"], deadlineAtMs: row["deadline_at_ms"],
                firedAtMs: row["fired_at_ms"], lateMs: row["late_ms"], detail: row["detail"])
        }
    }
}

extension Duration {
    static func minutes(_ minutes: Int64) -> Duration { .seconds(minutes * 60) }
    static func hours(_ hours: Int64) -> Duration { .seconds(hours * 3600) }
}

extension CountdownStore {
    /// The store's GRDB database; on a store of another engine the test fails here.
    var grdb: any DatabaseWriter {
        get throws { try #require(sqliteDatabase, "a store on SQLite") }
    }
}

/// The articles' `pass(_:_:)` on `clock`: lets a duration of real time pass on the virtual clock
/// while a ticker runs, one second at a time, so that its heartbeat keeps its lease live, as it
/// would on a real clock.
func timePasser(_ clock: VirtualClock) -> @Sendable (Duration, CountdownTicker) async -> Void {
    { duration, ticker in
        var left = duration
        while left > .zero {
            let step = min(left, .seconds(1))
            clock.advance(by: step)
            left -= step
            await ticker.waitUntilIdle()
        }
    }
}
