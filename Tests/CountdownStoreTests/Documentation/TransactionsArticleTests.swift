import Foundation
import GRDB
import Logging
import PostgresNIO
import Testing

@testable import CountdownStoreCore
@testable import CountdownStorePostgres
@testable import CountdownStoreSQLite

/// The code of the article "Transactions and exactly-once effects" and of the doc comments of
/// the host-transaction calls, run.
@Suite("Article: Transactions and exactly-once effects")
struct TransactionsArticleTests {
    private func shop(_ fixture: Fixture) async throws -> (DatabaseQueue, CountdownStore) {
        let orders = try DatabaseQueue(path: fixture.folder.path("shop.sqlite"))
        try await orders.write { db in
            try db.execute(sql: "CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT, total INTEGER)")
        }
        return (orders, try CountdownStore(database: orders, configuration: fixture.configuration))
    }

    /// The doc comment's example of ``CountdownStore/transaction(in:)``, in synchronous code.
    private func placeFromSynchronousCode(_ orders: DatabaseQueue, _ store: CountdownStore) throws {
        try orders.write { db in
            try db.execute(sql: "INSERT INTO orders (id, total) VALUES (?, ?)", arguments: [1043, 4990])
            try store.transaction(in: db).start("order-1043", duration: .seconds(15 * 60), group: "payments")
        }   // both commit, or neither does
    }

    @Test("On SQLite: the order and its deadline commit together; the closer closes and acknowledges together")
    func sqliteExamples() async throws {
        let fixture = try Fixture()
        let (orders, store) = try await shop(fixture)
        try await orders.write { db in
            try db.execute(sql: "INSERT INTO orders (id, status) VALUES (?, 'open')", arguments: [1042])
            try store.transaction(in: db).start("order-1042", duration: .seconds(15 * 60), group: "payments")
        }   // the order and its deadline commit together, or neither does
        try placeFromSynchronousCode(orders, store)
        #expect(try await store.countdown("order-1042")?.state == .running)
        #expect(try await store.countdown("order-1043")?.state == .running)

        try await store.heartbeat()
        try await run(store, fixture.clock, for: .seconds(15 * 60 + 1))
        let closing = Task {
            let closer = try await store.consumer("order-closer")
            for try await expiry in try await closer.events(.expiries) {
                try await orders.write { db in
                    try db.execute(
                        sql: "UPDATE orders SET status = 'expired' WHERE id = ?",
                        arguments: [expiry.key?.dropFirst("order-".count).description])
                    try store.transaction(in: db).acknowledge(expiry, of: closer)
                }   // closed and acknowledged together: once
            }
        }
        try await eventually("both orders are closed") {
            try await orders.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM orders WHERE status = 'expired'")
            } == 2
        }
        closing.cancel()
        _ = await closing.result
        let closer = try await store.consumer("order-closer")
        #expect(try await closer.acknowledgedThrough() == (try await store.recentEvents(kinds: [.expired], limit: 1).first?.id))
    }

    @Test("On PostgreSQL: the order and its deadline commit together on the host's connection")
    func postgresExamples() async throws {
        let fixture = try Fixture(engine: .postgres)
        let store = try await fixture.open()
        let client = try PostgresFixtures.client()
        let logger = Logger(label: "shop")
        // The host's table, where its connection finds it (the store's tables are in their schema).
        try await client.query(PostgresQuery(unsafeSQL: "DROP TABLE IF EXISTS public.orders"))
        try await client.query(PostgresQuery(unsafeSQL: "CREATE TABLE public.orders (id bigint PRIMARY KEY, status text, total bigint)"))
        do {
            let (id, total) = (1042, 4990)
        try await client.withConnection { connection in
            try await store.transaction(on: connection) { tx in
                try await connection.query("INSERT INTO orders (id, total) VALUES (\(id), \(total))", logger: logger)
                try await tx.start("order-\(id)", duration: .seconds(15 * 60), group: "payments")
            }   // the order and its deadline commit together, or neither does
        }
        }
        do {
            let id = 1043
        try await client.withConnection { connection in
            try await store.transaction(on: connection) { countdowns in
                try await connection.query("INSERT INTO orders (id, status) VALUES (\(id), 'open')", logger: logger)
                try await countdowns.start("order-\(id)", duration: .seconds(15 * 60), group: "payments")
            }
        }
        }
        let rows = try await client.query(PostgresQuery(unsafeSQL: "SELECT count(*)::bigint FROM public.orders"))
        for try await count in rows.decode(Int64.self) { #expect(count == 2) }
        try await client.query(PostgresQuery(unsafeSQL: "DROP TABLE public.orders"))
        #expect(try await store.countdown("order-1042")?.group == "payments")
        #expect(try await store.countdown("order-1043")?.group == "payments")
    }
}
