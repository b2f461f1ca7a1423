import Foundation
import GRDB
import Logging
import PostgresNIO
import Testing

@testable import CountdownStoreCore
@testable import CountdownStorePostgres
@testable import CountdownStoreSQLite

/// The store's writes inside the host's own transaction, and acknowledgements that commit with
/// a handler's writes: on SQLite, the host's GRDB transaction; on PostgreSQL, the host's connection.
@Suite("Host transactions")
struct HostTransactionTests {
    /// A store on a host's GRDB database with an `orders` table of its own.
    private func hostDatabase(_ fixture: Fixture) throws -> (DatabaseQueue, CountdownStore) {
        let queue = try DatabaseQueue(path: fixture.folder.path("host.sqlite"))
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE orders (id INTEGER PRIMARY KEY, state TEXT NOT NULL)")
            try db.execute(sql: "CREATE TABLE effects (event_id INTEGER PRIMARY KEY, reader TEXT NOT NULL)")
        }
        return (queue, try CountdownStore(database: queue, configuration: fixture.configuration))
    }

    private struct HostRefused: Error {}
    private let hostLogger = Logger(label: "host")

    /// Expects `body` to throw a ``CountdownError`` with `code`.
    private func refused(_ code: CountdownError.Code, _ body: () throws -> Void) {
        do {
            try body()
            Issue.record("accepted; expected \(code)")
        } catch let error as CountdownError {
            #expect(error.code == code)
        } catch {
            Issue.record("threw \(error); expected \(code)")
        }
    }

    @Test("SQLite: an order and its deadline commit together in the host's transaction, and the call returns what it returns alone")
    func sqliteCommitsTogether() async throws {
        let fixture = try Fixture()
        let (queue, store) = try hostDatabase(fixture)
        let version = store.changes.version
        let started = try await queue.write { db in
            try db.execute(sql: "INSERT INTO orders (id, state) VALUES (1042, 'open')")
            let countdown = try store.transaction(in: db).start(
                "order-1042", duration: .seconds(900), group: "payments", payload: .text("1042"))
            #expect(store.changes.version == version, "nobody hears of it before the commit")
            return countdown
        }
        #expect(store.changes.version > version, "the commit wakes the ticker and the streams")
        let alone = try await store.start("order-1043", duration: .seconds(900), group: "payments", payload: .text("1043"))
        #expect(started.remaining == alone.remaining && started.deadlineAt == alone.deadlineAt)
        #expect(started.state == .running && started.generation == 1)
        #expect(try await store.countdown("order-1042") == started)
        let kinds = try await store.recentEvents(limit: 10).map(\.kind)
        #expect(kinds.filter { $0 == .started }.count == 2)
        #expect(try await queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM orders") } == 1)
    }

    @Test("SQLite: a rollback leaves no row, no event and no wake-up; a refusal leaves nothing of itself and the transaction goes on")
    func sqliteRollbackLeavesNoTrace() async throws {
        let fixture = try Fixture()
        let (queue, store) = try hostDatabase(fixture)
        try await store.start("taken", duration: .seconds(60))
        let (version, lastEvent) = (store.changes.version, try await store.lastEventID())
        #expect(throws: HostRefused.self) {
            try queue.write { db in
                try db.execute(sql: "INSERT INTO orders (id, state) VALUES (1, 'open')")
                try store.transaction(in: db).start("order-1", duration: .seconds(900))
                throw HostRefused()
            }
        }
        #expect(try await store.countdown("order-1") == nil)
        #expect(try await store.lastEventID() == lastEvent)
        #expect(store.changes.version == version)
        #expect(try await queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM orders") } == 0)

        try await queue.write { db in
            let tx = try store.transaction(in: db)
            try db.execute(sql: "INSERT INTO orders (id, state) VALUES (2, 'open')")
            refused(.alreadyActive) { try tx.start("taken", duration: .seconds(5)) }
            refused(.invalidKey) { try tx.start("", duration: .seconds(5)) }
            try tx.start("order-2", duration: .seconds(900))
        }
        #expect(try await store.countdown("taken")?.duration == .seconds(60), "the refused start changed nothing")
        #expect(try await store.countdown("order-2")?.state == .running)
        #expect(try await queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM orders") } == 1)
    }

    @Test("SQLite: a connection to another file, or one outside a transaction, is refused by name")
    func sqliteRefusesAnotherDatabase() async throws {
        let fixture = try Fixture()
        let (queue, store) = try hostDatabase(fixture)
        let other = try DatabaseQueue(path: fixture.folder.path("other.sqlite"))
        try await other.write { db in
            _ = #expect(throws: CountdownError.self) { try store.transaction(in: db) }
        }
        try await queue.writeWithoutTransaction { db in
            _ = #expect(throws: CountdownError.self) { try store.transaction(in: db) }
        }
    }

    @Test("SQLite: a handler's write and its acknowledgement commit together; a reader that lost its claim rolls its effect back, so each expiry takes effect once")
    func sqliteEffectsExactlyOnce() async throws {
        let fixture = try Fixture()
        let (queue, store) = try hostDatabase(fixture)
        try await store.heartbeat()
        for index in 1...3 { try await store.start("order-\(index)", duration: .seconds(Int64(index))) }
        try await run(store, fixture.clock, for: .seconds(4))
        let consumer = try await store.consumer("closer")
        var readerA = try await consumer.events(.expiries).makeAsyncIterator()
        let first = try #require(try await readerA.next())
        try await queue.write { db in
            try db.execute(sql: "INSERT INTO effects (event_id, reader) VALUES (?, 'A')", arguments: [first.id])
            try store.transaction(in: db).acknowledge(first, of: consumer)
        }
        #expect(try await consumer.acknowledgedThrough() == first.id)

        // A stalls with the second expiry in hand; its claim runs out and B takes it over.
        let stalled = try #require(try await readerA.next())
        fixture.clock.advance(by: fixture.configuration.claimTimeout)
        let hostB = try CountdownStore(database: queue, configuration: fixture.configuration)
        let consumerB = try await hostB.consumer("closer")
        var readerB = try await consumerB.events(.expiries).makeAsyncIterator()
        let taken = try #require(try await readerB.next())
        #expect(taken.id == stalled.id)
        try await queue.write { db in
            try db.execute(sql: "INSERT INTO effects (event_id, reader) VALUES (?, 'B')", arguments: [taken.id])
            try hostB.transaction(in: db).acknowledge(taken, of: consumerB)
        }
        // A wakes up and handles it too: the acknowledgement fails, and its effect rolls back.
        do {
            try await queue.write { db in
                try db.execute(sql: "INSERT INTO effects (event_id, reader) VALUES (?, 'A')", arguments: [stalled.id + 1_000_000])
                try store.transaction(in: db).acknowledge(stalled, of: consumer)
            }
            Issue.record("the stale acknowledgement committed")
        } catch let error as CountdownError {
            #expect(error.code == .claimLost)
        }
        let effects = try queue.read { db in try Row.fetchAll(db, sql: "SELECT event_id, reader FROM effects ORDER BY event_id") }
        #expect(effects.map { $0["reader"] as String } == ["A", "B"], "each expiry's effect once")
        #expect(try await consumer.acknowledgedThrough() == taken.id)
        withExtendedLifetime(readerA) {}
    }

    // MARK: PostgreSQL

    /// A store in a schema of its own, and the host's tables beside it.
    private func hostSchema(_ fixture: Fixture) async throws -> (PostgresClient, CountdownStore) {
        let client = try PostgresFixtures.client()
        let store = try await fixture.open()
        try await client.query(PostgresQuery(unsafeSQL: "CREATE TABLE \(fixture.schema).orders (id bigint PRIMARY KEY)"))
        try await client.query(
            PostgresQuery(unsafeSQL: "CREATE TABLE \(fixture.schema).effects (event_id bigint PRIMARY KEY, reader text)"))
        return (client, store)
    }

    private func count(_ client: PostgresClient, _ table: String) async throws -> Int {
        let rows = try await client.query(PostgresQuery(unsafeSQL: "SELECT count(*)::bigint FROM \(table)"))
        for try await value in rows.decode(Int64.self) { return Int(value) }
        return 0
    }

    @Test("PostgreSQL: an order and its deadline commit together on the host's connection; a rollback leaves neither")
    func postgresCommitsTogether() async throws {
        let fixture = try Fixture(engine: .postgres)
        let (client, store) = try await hostSchema(fixture)
        let orders = "\(fixture.schema).orders"
        let version = store.changes.version
        let started = try await client.withConnection { connection in
            try await store.transaction(on: connection) { tx in
                try await connection.query(PostgresQuery(unsafeSQL: "INSERT INTO \(orders) VALUES (1042)"), logger: hostLogger)
                return try await tx.start("order-1042", duration: .seconds(900), group: "payments")
            }
        }
        #expect(store.changes.version > version)
        #expect(try await store.countdown("order-1042") == started)
        #expect(try await count(client, orders) == 1)

        let lastEvent = try await store.lastEventID()
        await #expect(throws: HostRefused.self) {
            try await client.withConnection { connection in
                try await store.transaction(on: connection) { tx in
                    try await connection.query(PostgresQuery(unsafeSQL: "INSERT INTO \(orders) VALUES (1043)"), logger: hostLogger)
                    try await tx.start("order-1043", duration: .seconds(900))
                    await expectError(.alreadyActive) { try await tx.start("order-1042", duration: .seconds(5)) }
                    throw HostRefused()
                }
            }
        }
        #expect(try await store.countdown("order-1043") == nil)
        #expect(try await store.lastEventID() == lastEvent)
        #expect(try await count(client, orders) == 1)
    }

    @Test("PostgreSQL: a handler's write and its acknowledgement commit together; a reader that lost its claim rolls its effect back")
    func postgresEffectsExactlyOnce() async throws {
        let fixture = try Fixture(engine: .postgres)
        let (client, store) = try await hostSchema(fixture)
        let effects = "\(fixture.schema).effects"
        try await store.heartbeat()
        for index in 1...2 { try await store.start("order-\(index)", duration: .seconds(Int64(index))) }
        try await run(store, fixture.clock, for: .seconds(3))
        let consumer = try await store.consumer("closer")
        var readerA = try await consumer.events(.expiries).makeAsyncIterator()
        let stalled = try #require(try await readerA.next())
        fixture.clock.advance(by: fixture.configuration.claimTimeout)
        let hostB = try await fixture.open()
        let consumerB = try await hostB.consumer("closer")
        var readerB = try await consumerB.events(.expiries).makeAsyncIterator()
        let taken = try #require(try await readerB.next())
        #expect(taken.id == stalled.id)
        try await client.withConnection { connection in
            try await hostB.transaction(on: connection) { tx in
                try await connection.query(PostgresQuery(unsafeSQL: "INSERT INTO \(effects) VALUES (\(taken.id), 'B')"), logger: hostLogger)
                try await tx.acknowledge(taken, of: consumerB)
            }
        }
        do {
            try await client.withConnection { connection in
                try await store.transaction(on: connection) { tx in
                    try await connection.query(
                        PostgresQuery(unsafeSQL: "INSERT INTO \(effects) VALUES (\(stalled.id + 1_000_000), 'A')"), logger: hostLogger)
                    try await tx.acknowledge(stalled, of: consumer)
                }
            }
            Issue.record("the stale acknowledgement committed")
        } catch let error as CountdownError {
            #expect(error.code == .claimLost)
        }
        #expect(try await count(client, effects) == 1, "the expiry took effect once")
        #expect(try await consumer.acknowledgedThrough() == taken.id)
        withExtendedLifetime(readerA) {}
    }
}
