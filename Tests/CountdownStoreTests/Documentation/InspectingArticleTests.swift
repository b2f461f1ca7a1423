import CountdownStore
import Foundation
import GRDB
import Testing

// The article "Inspecting with sqlite3" (CountdownStore.docc/InspectingWithSQLite.md) has no
// Swift code; its SQL is checked here instead. Every ```sql block of the article runs against a
// store shaped like the one of the article's session, on a read-only connection of its own (as
// `sqlite3 -readonly` opens it), and the answers the article describes are checked. The article
// must also name every table, view and column of the schema.

@Suite("Article: Inspecting with sqlite3")
struct InspectingArticleTests {
    /// The article's text.
    static let article: String = {
        let root = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let url = root.appendingPathComponent("Sources/CountdownStore/CountdownStore.docc/InspectingWithSQLite.md")
        return (try? String(contentsOf: url, encoding: .utf8)) ?? ""
    }()

    /// The article's ```sql blocks, in order.
    static let queries: [String] = {
        var blocks: [String] = []
        var current: [String]?
        for line in article.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```sql" {
                current = []
            } else if current != nil, line == "```" {
                blocks.append(current!.joined(separator: "\n"))
                current = nil
            } else {
                current?.append(String(line))
            }
        }
        return blocks
    }()

    /// The one query of the article that contains `marker`.
    static func query(_ marker: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let matches = queries.filter { $0.contains(marker) }
        #expect(matches.count == 1, "queries containing \(marker)", sourceLocation: sourceLocation)
        return try #require(matches.first, sourceLocation: sourceLocation)
    }

    /// A store like the one of the article's session, on the real clock (the views read it),
    /// with a lease that stays live for the length of the test.
    static func sessionStore(_ folder: TemporaryFolder) async throws -> CountdownStore {
        let store = try CountdownStore(path: folder.path(), configuration: .init(leaseDuration: .seconds(3600)))
        try await store.start("order-1042", duration: .seconds(15 * 60), group: "payments", payload: .text(#"{"order":1042}"#))
        try await store.start("order-1043", duration: .seconds(8 * 60), group: "payments")
        try await store.start("order-1041", duration: .seconds(1), group: "payments")
        try await store.start("otp:alice", duration: .seconds(2), group: "codes")
        try await store.start("screen-time", duration: .seconds(3600), policy: .active)
        try await store.pause("screen-time")
        try await store.startStopwatch("build-42", group: "ci")
        try await store.heartbeat()
        // Expired at once, without waiting: shortened past zero.
        try await store.shorten("order-1041", by: .seconds(1))
        try await store.shorten("otp:alice", by: .seconds(2))
        let mailer = try await store.consumer("mailer")
        try await mailer.acknowledge(through: try #require(try await store.recentEvents(kinds: [.expired], limit: 1).first).id)
        try await store.extend("order-1042", by: .seconds(5 * 60))
        try await store.start("order-1044", duration: .seconds(20 * 60), group: "payments")
        try await store.cancel("order-1043")
        try await store.start("order-1043b", duration: .seconds(5 * 60), group: "payments")
        try await store.remove("otp:alice")
        return store
    }

    /// A read-only connection of its own, as `sqlite3 -readonly` opens the file.
    static func reader(_ folder: TemporaryFolder) throws -> DatabaseQueue {
        var configuration = GRDB.Configuration()
        configuration.readonly = true
        return try DatabaseQueue(path: folder.path(), configuration: configuration)
    }

    @Test("The article has its SQL blocks, and every one runs on a store of the session's shape")
    func everyQueryRuns() async throws {
        #expect(Self.queries.count >= 12, "\(Self.queries.count) sql blocks found")
        let folder = try TemporaryFolder()
        let store = try await Self.sessionStore(folder)
        let reader = try Self.reader(folder)
        for query in Self.queries {
            #expect(throws: Never.self, "\(query)") {
                _ = try reader.read { db in try Row.fetchAll(db, sql: query) }
            }
        }
        try reader.close()
        try await store.close()
    }

    @Test("The queries answer what the article says they answer")
    func queriesAnswerTheirQuestions() async throws {
        let folder = try TemporaryFolder()
        let store = try await Self.sessionStore(folder)
        let reader = try Self.reader(folder)
        func rows(_ marker: String) throws -> [Row] {
            let sql = try Self.query(marker)
            return try reader.read { db in try Row.fetchAll(db, sql: sql) }
        }

        // Active items, soonest first, stopwatches last.
        let active = try rows("FROM active_countdowns\nORDER BY")
        #expect(active.map { $0["key"] as String } == ["order-1043b", "order-1042", "order-1044", "screen-time", "build-42"])
        // What expires in the next ten minutes.
        #expect(try rows("10 * 60 * 1000").map { $0["key"] as String } == ["order-1043b"])
        // The lease, held by this store instance.
        let lease = try #require(try rows("FROM countdown_lease").first)
        #expect(lease["holder"] as String? == store.instanceID)
        #expect(lease["live"] as Int == 1)
        let now = try #require(try rows("SELECT * FROM countdown_now").first)
        #expect(now["ticking"] as Int == 1 && now["lease_holder"] as String? == store.instanceID)
        // The history of one key: generation 2 after the extension.
        let history = try rows("WHERE key = 'order-1042'")
        #expect(history.map { $0["kind"] as String } == ["started", "extended"])
        #expect(history.map { $0["generation"] as Int } == [1, 2])
        // Expiries of the payments group today (the codes group left out).
        let expiry = try #require(try await store.recentEvents(kinds: [.expired]).first { $0.key == "order-1041" })
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = TimeZone(identifier: "UTC")!
        if utc.isDate(expiry.recordedAt, inSameDayAs: Date()) {
            let today = try rows("'start of day'")
            #expect(today.map { $0["key"] as String } == ["order-1041"])
            #expect(today.first?["late_ms"] as Int? == 0)
        }
        // The consumer acknowledged both expiries.
        let consumer = try #require(try rows("FROM countdown_consumers").first)
        #expect(consumer["name"] as String == "mailer" && consumer["expiries_after_cursor"] as Int == 0)
        // Migrations, in order.
        #expect(try rows("FROM countdown_migrations").map { $0["name"] as String }
            == ["0001_core_tables.sql", "0002_views.sql", "0003_listing_indexes.sql", "0004_expiry_at_query_time.sql", "0005_consumer_claims.sql", "0006_retention.sql", "0007_active_until_lease_end.sql", "0008_rules.sql", "0009_events_by_kind_and_group.sql"])
        // A removed key keeps its generation.
        let retired = try rows("FROM countdown_retired_keys")
        #expect(retired.map { $0["key"] as String } == ["otp:alice"] && retired.first?["generation"] as Int? == 2)
        // Raw item rows: a wall item is due at its start on A + G plus its duration.
        for item in try rows("FROM countdowns\nORDER BY id") where item["state"] as String == "running" && item["duration_ms"] as Int? != nil {
            let offset: Int64 = item["start_offset_ms"]
            let gap: Int64 = item["policy"] as String == "wall" ? item["gap_at_start_ms"] : 0
            let paused: Int64 = item["paused_ms"]
            let duration: Int64 = item["duration_ms"]
            #expect(item["deadline_ms"] as Int64 == offset + gap + paused + duration)
        }
        // Clock edits: none in this store.
        #expect(try rows("'clock_edited', 'calibrated'").isEmpty)
        #expect(try rows("WHERE key IN ('order-1042', 'order-1044')").count == 2)

        // Freed by a graceful stop: no holder, not live.
        try await store.releaseLease()
        let freed = try #require(try rows("FROM countdown_lease").first)
        #expect(freed["holder"] as String? == nil && freed["live"] as Int == 0)
        try reader.close()
        try await store.close()
    }

    @Test("The article names every table, view and column of the schema")
    func everyColumnIsDescribed() async throws {
        let folder = try TemporaryFolder()
        let store = try CountdownStore(path: folder.path())
        let schema = try await store.grdb.read { db -> [(String, [String])] in
            let names = try String.fetchAll(
                db, sql: "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name")
            return try names.map { name in (name, try db.columns(in: name).map(\.name)) }
        }
        #expect(schema.count == 12)
        for (name, columns) in schema {
            #expect(Self.article.contains("### \(name)") || Self.article.contains(", \(name)"), "no section for \(name)")
            for column in columns {
                #expect(Self.article.contains("`\(column)`"), "\(name).\(column) is not described")
            }
        }
        try await store.close()
    }

    @Test(
        "sqlite3 -readonly reads the store while it holds the lease, and refuses a write",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3")))
    func sqlite3ReadOnly() async throws {
        let folder = try TemporaryFolder()
        let store = try await Self.sessionStore(folder)
        func sqlite3(_ sql: String) throws -> (status: Int32, output: String) {
            let ran = try HelperProcess.run(URL(fileURLWithPath: "/usr/bin/sqlite3"), ["-readonly", folder.path(), sql])
            return (ran.status, ran.stdout)
        }
        let lease = try sqlite3(try Self.query("FROM countdown_lease"))
        #expect(lease.status == 0)
        #expect(lease.output.hasPrefix("\(store.instanceID)|") && lease.output.hasSuffix("|1\n"), "\(lease.output)")
        let before = try await store.countdown("order-1042")
        let write = try sqlite3("UPDATE countdowns SET state = 'cancelled' WHERE key = 'order-1042'")
        #expect(write.status != 0, "a read-only shell refuses writes")
        #expect(try await store.countdown("order-1042")?.state == before?.state)
        try await store.close()
    }
}
