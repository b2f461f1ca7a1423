import Foundation
import PostgresNIO
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite
@testable import CountdownStorePostgres

@Suite("PostgreSQL migrations", .timeLimit(.minutes(2)))
struct PostgresMigrationTests {
    /// `Migrations/postgres/` in the source tree, by file name.
    static let files: [String] = {
        let folder = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Migrations").appendingPathComponent("postgres")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.filter { $0.hasSuffix(".sql") }.sorted()
    }()

    /// The migrations the schema records, in the order they were applied.
    private func applied(_ schema: String) async throws -> [String] {
        try await PostgresFixtures.client().query(
            PostgresQuery(unsafeSQL: "SELECT name FROM \"\(schema)\".countdown_migrations ORDER BY applied_order")
        ).decode(String.self).reduce(into: []) { $0.append($1) }
    }

    private func execute(_ sql: String) async throws {
        _ = try await PostgresFixtures.client().query(PostgresQuery(unsafeSQL: sql))
    }

    @Test("A schema made by the first migration alone and filled by hand upgrades in place")
    func schemaFromTheFirstMigrationUpgrades() async throws {
        let first = try #require(Self.files.first)
        #expect(Self.files.count >= 2, "there is a later migration to apply: \(Self.files)")
        let fixture = try Fixture(engine: .postgres)
        let schema = fixture.schema
        let old = try await CountdownStore(
            client: try PostgresFixtures.client(), schema: schema, place: "schema \(schema)", wakeUps: .pollOnly,
            configuration: fixture.configuration, databaseClock: false, migratingUpTo: first)
        try await old.close()
        #expect(try await applied(schema) == [first])
        #expect(try await !tableExists(schema, "countdown_consumer_claims"), "the later migration has not run")

        // A countdown and its event as the first schema holds them, written by hand.
        let now = fixture.clock.systemMilliseconds
        try await execute(
            """
            INSERT INTO "\(schema)".countdowns (key, group_name, kind, policy, state, duration_ms, start_offset_ms,
                gap_at_start_ms, started_at_ms, deadline_ms, updated_at_ms)
            VALUES ('old-order', 'payments', 'countdown', 'wall', 'running', 600000, 0, 0, \(now), 600000, \(now))
            """)
        try await execute(
            "INSERT INTO \"\(schema)\".countdown_events (kind, key, generation, at_ms) VALUES ('started', 'old-order', 1, \(now))")
        fixture.clock.advance(by: .seconds(60))

        let store = try await fixture.open()
        #expect(try await applied(schema) == Self.files)
        let diagnostics = try await store.diagnostics()
        #expect(diagnostics.appliedMigrations == Self.files && diagnostics.knownMigrations == Self.files)
        let item = try #require(try await store.countdown("old-order"))
        #expect(item.remaining == .seconds(540) && item.group == "payments")
        let viewKeys = try await PostgresFixtures.client().query(
            PostgresQuery(unsafeSQL: "SELECT key FROM \"\(schema)\".countdown_figures")
        ).decode(String.self).reduce(into: [String]()) { $0.append($1) }
        #expect(viewKeys == ["old-order"])
        try await store.pause("old-order")
        // The later migration's table works: a shared consumer claims the old event and the new one.
        var mailer = try await store.consumer("mailer").events().makeAsyncIterator()
        #expect(try await mailer.next()?.key == "old-order")
        #expect(try await mailer.next()?.kind == .paused)
        try await store.close()
    }

    @Test("A schema that records a migration this build does not know is refused and left untouched")
    func newerSchemaIsRefusedAndUntouched() async throws {
        let fixture = try Fixture(engine: .postgres)
        let schema = fixture.schema
        do {
            let store = try await fixture.open()
            try await store.start("keep-me", duration: .minutes(5))
            try await store.close()
        }
        try await execute(
            "INSERT INTO \"\(schema)\".countdown_migrations (name, applied_at_ms) VALUES ('9999_from_the_future.sql', 0)")
        let before = try await PostgresFixtures.snapshot(schema: schema)
        let error = await expectError(.schemaTooNew) { try await fixture.open() }
        #expect(error?.message.contains("9999_from_the_future.sql") == true)
        #expect(try await PostgresFixtures.snapshot(schema: schema) == before)
    }

    private func tableExists(_ schema: String, _ table: String) async throws -> Bool {
        try await PostgresFixtures.client().query(
            PostgresQuery(unsafeSQL: "SELECT to_regclass('\"\(schema)\".\(table)') IS NOT NULL")
        ).decode(Bool.self).first { _ in true } ?? false
    }
}
