import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQL

/// A statement written once renders each engine's placeholders, table names and spellings.
@Suite("SQL rendering")
struct SQLRenderingTests {
    static let postgres = SQLDialect.postgres(tablePrefix: "\"app\".")

    @Test("Arguments taken once each and in order are `?` on SQLite and `$n` on PostgreSQL")
    func placeholdersInOrder() {
        let sql: SQL = "SELECT 1 FROM \(table: "t") WHERE a = \(arg: 1) AND b = \(arg: 2, as: "bigint")"
        #expect(sql.rendered(for: .sqlite) == "SELECT 1 FROM t WHERE a = ? AND b = ?")
        #expect(sql.rendered(for: Self.postgres) == "SELECT 1 FROM \"app\".t WHERE a = $1 AND b = $2::bigint")
    }

    @Test("Arguments repeated or reordered are numbered on SQLite too")
    func placeholdersNumbered() {
        let sql: SQL = "UPDATE t SET a = \(SQL.greatest)(a, \(arg: 2)) WHERE id = \(arg: 1) AND b = \(arg: 2)"
        #expect(sql.rendered(for: .sqlite) == "UPDATE t SET a = max(a, ?2) WHERE id = ?1 AND b = ?2")
        #expect(sql.rendered(for: Self.postgres) == "UPDATE t SET a = greatest(a, $2) WHERE id = $1 AND b = $2")
    }

    @Test("What one engine alone writes is left out of the other's text")
    func dialectSwitch() {
        let sql: SQL = "SELECT id FROM \(table: "t")\(sqlite: " INDEXED BY t_i") WHERE a < \(arg: 1)\(postgres: " FOR UPDATE")"
        #expect(sql.rendered(for: .sqlite) == "SELECT id FROM t INDEXED BY t_i WHERE a < ?")
        #expect(sql.rendered(for: Self.postgres) == "SELECT id FROM \"app\".t WHERE a < $1 FOR UPDATE")
    }

    @Test("The shared statements lock rows on PostgreSQL only, and bind their values in order")
    func sharedStatements() {
        let sqlite = SQLStatements(.sqlite)
        let postgres = SQLStatements(Self.postgres)
        #expect(sqlite.consumerCursor("c", locking: true).sql == "SELECT last_event_id FROM countdown_consumers WHERE name = ?")
        #expect(
            postgres.consumerCursor("c", locking: true).sql
                == "SELECT last_event_id FROM \"app\".countdown_consumers WHERE name = $1 FOR UPDATE")
        let advance = sqlite.advanceConsumer("c", to: 7, at: 9)
        #expect(advance.sql.contains("max(countdown_consumers.last_event_id, ?2)"))
        #expect(advance.arguments == [.text("c"), .int(7), .int(9)])
        let keys = (0..<501).map { "k\($0)" }
        #expect(postgres.itemsByKey(keys[0..<500], ordered: true, locking: true).sql.hasSuffix("$500) ORDER BY key FOR UPDATE"))
        #expect(sqlite.itemsByKey(keys[500...], ordered: false, locking: false).sql.hasSuffix("WHERE key IN (?)"))
        #expect(postgres.events(after: 3, through: 9, limit: 10).sql.hasSuffix("WHERE id > $1 AND id <= $3 ORDER BY id LIMIT $2"))
        #expect(sqlite.events(after: 3, through: nil, limit: 10).sql.hasSuffix("FROM countdown_events WHERE id > ? ORDER BY id LIMIT ?"))
    }
}
