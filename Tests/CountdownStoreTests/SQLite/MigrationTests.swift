import Foundation
import GRDB
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

@Suite("Migrations")
struct MigrationTests {
    /// `Migrations/sqlite/` in the source tree.
    static let folder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Migrations").appendingPathComponent("sqlite")

    @Test("What runs is exactly what Migrations/sqlite/ holds, in file-name order")
    func embeddedMigrationsAreExactlyTheFolder() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.folder.path)
            .filter { $0.hasSuffix(".sql") }.sorted()
        #expect(names == Migration.embedded.map(\.name))
        #expect(names.count >= 2)
        for migration in Migration.embedded {
            let data = try Data(contentsOf: Self.folder.appendingPathComponent(migration.name))
            #expect(Data(migration.sql.utf8) == data, "\(migration.name) is embedded byte for byte")
        }
        for (index, name) in names.enumerated() {
            #expect(name.hasPrefix(String(format: "%04d_", index + 1)), "\(name) is numbered in sequence")
        }
    }

    @Test("A fresh database records every migration by file name")
    func freshDatabaseRecordsEveryMigration() async throws {
        let fixture = try Fixture()
        let store = try await fixture.open()
        let applied = try await store.grdb.read { db in try SQLiteMigrator.applied(db) }
        #expect(applied == Migration.embedded.map(\.name))
        try await store.close()
        // Opening again applies nothing twice.
        let again = try await fixture.open()
        #expect(try await again.grdb.read { db in try SQLiteMigrator.applied(db) } == applied)
    }

    @Test("A database made by 0001 alone and filled by hand upgrades in place")
    func databaseFromTheFirstMigrationUpgrades() async throws {
        let fixture = try Fixture()
        let first = try #require(Migration.embedded.first?.name)
        do {
            let queue = try DatabaseQueue(path: fixture.path)
            try SQLiteMigrator().migrate(queue, upTo: first)
            try await queue.write { db in
                #expect(try SQLiteMigrator.applied(db) == [first])
                #expect(try !db.viewExists("active_countdowns"))
                let now = fixture.clock.systemMilliseconds
                try db.execute(
                    sql: """
                        INSERT INTO countdown_clock (id, created_at_ms, active_ms, gap_ms, heartbeat_at_ms,
                            heartbeat_boot_ms, boot_id, wall_floor_ms)
                        VALUES (1, ?1, 0, 0, ?1, ?2, ?3, ?1)
                        """,
                    arguments: [now, fixture.clock.bootMilliseconds, fixture.clock.bootIdentity])
                try db.execute(
                    sql: """
                        INSERT INTO countdowns (key, group_name, kind, policy, state, duration_ms, start_offset_ms,
                            gap_at_start_ms, started_at_ms, deadline_ms, updated_at_ms)
                        VALUES ('old-order', 'payments', 'countdown', 'wall', 'running', 600000, 0, 0, ?1, 600000, ?1)
                        """,
                    arguments: [now])
                try db.execute(
                    sql: "INSERT INTO countdown_events (kind, key, generation, at_ms) VALUES ('started', 'old-order', 1, ?)",
                    arguments: [now])
            }
            try queue.close()
        }
        fixture.clock.advance(by: .seconds(60))

        let store = try await fixture.open()
        #expect(try await store.grdb.read { db in try SQLiteMigrator.applied(db) } == Migration.embedded.map(\.name))
        let item = try #require(try await store.countdown("old-order"))
        #expect(item.remaining == .seconds(540))
        #expect(item.group == "payments")
        let viewRows = try await store.grdb.read { db in
            // (The views read the real clock, the store a virtual one: only the row's presence is compared.)
            try Row.fetchAll(db, sql: "SELECT key, remaining_ms FROM countdown_figures").map { "\($0["key"] as String)" }
        }
        #expect(viewRows == ["old-order"])
        try await store.pause("old-order")
        #expect(try await events(store, key: "old-order").map(\.kind) == ["started", "paused"])
    }

    @Test("A database with a newer schema is refused and left untouched")
    func newerSchemaIsRefusedAndUntouched() async throws {
        let fixture = try Fixture()
        do {
            let store = try await fixture.open()
            try await store.start("keep-me", duration: .minutes(5))
            try await store.grdb.write { db in
                try db.execute(sql: "INSERT INTO countdown_migrations (name, applied_at_ms) VALUES ('9999_from_the_future.sql', 0)")
            }
            try await store.close()
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: fixture.path))
        let error = await expectError(.schemaTooNew) { try await fixture.open() }
        #expect(error?.message.contains("9999_from_the_future.sql") == true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: fixture.path)) == before)
    }
}
