import CountdownStore
import CountdownStorePostgres
import Foundation
import GRDB
import PostgresNIO

// The store's writes inside the host's own transactions, beside the same rows written raw in one
// transaction each: an order with its deadline, and an expiry's effect with its acknowledgement.

extension Benchmarks {
    /// SQLite: an order row and its countdown in one GRDB transaction of the host's, one at a
    /// time; raw: the order, the countdown and its event in one transaction through the C API.
    /// Then each of as many expiries handled: its effect row and its acknowledgement in one
    /// transaction; raw: the effect row and the consumer's cursor. The host writes with GRDB's
    /// synchronous `write`, as the raw side calls SQLite directly.
    func hostTransactions() async throws -> [Figure] {
        let count = sizes.single
        let file = try await emptyStore("single-host-ours.sqlite")
        // The host's connection as the raw side's: WAL, synchronous NORMAL.
        var configuration = GRDB.Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
        let database = try DatabaseQueue(path: file, configuration: configuration)
        try await database.write { db in
            try db.execute(sql: "CREATE TABLE orders (id INTEGER PRIMARY KEY)")
            try db.execute(sql: "CREATE TABLE effects (key TEXT NOT NULL, generation INTEGER NOT NULL)")
        }
        let store = try CountdownStore(database: database)
        let placing = try await timed {
            for index in 0..<count {
                try database.write { db in
                    try db.execute(sql: "INSERT INTO orders (id) VALUES (?)", arguments: [index])
                    try store.transaction(in: db).start("order-\(index)", duration: .milliseconds(1 + Int64(index % 50)))
                }
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        _ = try await store.expireDue()
        let consumer = try await store.consumer("closer")
        var expiries = try await consumer.events(.expiries).makeAsyncIterator()
        func handle(_ expiry: CountdownEvent) throws {
            try database.write { db in
                try db.execute(
                    sql: "INSERT INTO effects (key, generation) VALUES (?, ?)", arguments: [expiry.key, expiry.generation])
                try store.transaction(in: db).acknowledge(expiry, of: consumer)
            }
        }
        let handling = try await timed {
            for _ in 0..<count {
                guard let expiry = try await expiries.next() else { throw BenchmarkError("the expiries ended early") }
                try handle(expiry)
            }
        }
        try await store.close()

        let raw = try RawDatabase(path: try await emptyStore("single-host-raw.sqlite"))
        try raw.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        try raw.execute("CREATE TABLE effects (key TEXT NOT NULL, generation INTEGER NOT NULL)")
        try raw.execute("INSERT INTO countdown_consumers (name, last_event_id, updated_at_ms) VALUES ('closer', 0, 0)")
        let (order, item, event) = (
            try raw.prepare("INSERT INTO orders (id) VALUES (?)"), try raw.prepare(Raw.insertItem),
            try raw.prepare(Raw.insertStartEvent)
        )
        let (effect, cursor) = (
            try raw.prepare("INSERT INTO effects (key, generation) VALUES (?, 1)"),
            try raw.prepare("UPDATE countdown_consumers SET last_event_id = ?, updated_at_ms = ? WHERE name = 'closer'")
        )
        let (begin, commit) = (try raw.prepare("BEGIN IMMEDIATE"), try raw.prepare("COMMIT"))
        let now = Date().millisecondsSince1970
        let rawPlacing = try await timed {
            for index in 0..<count {
                let key = "order-\(index)"
                try begin.bind([]).run()
                try order.bind([.int(Int64(index))]).run()
                try item.bind([.text(key), .text("g0"), .int(3_600_000), .int(now)]).run()
                try event.bind([.text(key), .text("g0"), .int(now), .text("{\"duration_ms\":3600000}")]).run()
                try commit.bind([]).run()
            }
        }
        let rawHandling = try await timed {
            for index in 0..<count {
                try begin.bind([]).run()
                try effect.bind([.text("order-\(index)")]).run()
                try cursor.bind([.int(Int64(index + 1)), .int(now)]).run()
                try commit.bind([]).run()
            }
        }
        return [
            Figure(
                name: "an order with its deadline in the host's transaction", n: count, ours: Double(count) / placing,
                raw: Double(count) / rawPlacing, unit: "commits/s", target: .unjudged),
            Figure(
                name: "an expiry's effect with its acknowledgement in the host's transaction", n: count,
                ours: Double(count) / handling, raw: Double(count) / rawHandling, unit: "commits/s", target: .unjudged),
        ]
    }
}

extension PostgresBenchmarks {
    /// PostgreSQL: the same two cases on the host's connection (``CountdownStore/transaction(on:_:)``),
    /// beside the same rows sent raw in one transaction each.
    func hostTransactions() async throws -> [Figure] {
        let count = sizes.single
        let schema = try await emptyStore("host_ours")
        let prefix = prefix(schema)
        try await raw.query(PostgresRaw.query("CREATE TABLE \(prefix)orders (id bigint PRIMARY KEY)"))
        try await raw.query(PostgresRaw.query("CREATE TABLE \(prefix)effects (key text NOT NULL, generation bigint NOT NULL)"))
        let store = try await open(schema)
        let (orders, effects, logger) = ("\(prefix)orders", "\(prefix)effects", logger)
        let placing = try await timed {
            for index in 0..<count {
                try await ours.withConnection { connection in
                    try await store.transaction(on: connection) { tx in
                        try await connection.query("INSERT INTO \(unescaped: orders) VALUES (\(index))", logger: logger)
                        try await tx.start("order-\(index)", duration: .milliseconds(1 + Int64(index % 50)))
                    }
                }
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        _ = try await store.expireDue()
        let consumer = try await store.consumer("closer")
        var expiries = try await consumer.events(.expiries).makeAsyncIterator()
        let handling = try await timed {
            for _ in 0..<count {
                guard let expiry = try await expiries.next() else { throw BenchmarkError("the expiries ended early") }
                try await ours.withConnection { connection in
                    try await store.transaction(on: connection) { tx in
                        try await connection.query(
                            "INSERT INTO \(unescaped: effects) VALUES (\(expiry.key ?? ""), \(expiry.generation ?? 0))",
                            logger: logger)
                        try await tx.acknowledge(expiry, of: consumer)
                    }
                }
            }
        }
        try await store.close()

        let rawSchema = try await emptyStore("host_raw")
        let rawPrefix = self.prefix(rawSchema)
        try await raw.query(PostgresRaw.query("CREATE TABLE \(rawPrefix)orders (id bigint PRIMARY KEY)"))
        try await raw.query(PostgresRaw.query("CREATE TABLE \(rawPrefix)effects (key text NOT NULL, generation bigint NOT NULL)"))
        try await raw.query(
            PostgresRaw.query(
                "INSERT INTO \(rawPrefix)countdown_consumers (name, last_event_id, updated_at_ms) VALUES ('closer', 0, 0)"))
        let statements = PostgresRaw.Statements(prefix: rawPrefix)
        let now = Date().millisecondsSince1970
        let rawPlacing = try await timed {
            for index in 0..<count {
                try await raw.withTransaction(logger: logger) { connection in
                    try await connection.query(
                        PostgresRaw.query("INSERT INTO \(rawPrefix)orders VALUES ($1)", [.int(Int64(index))]), logger: logger)
                    try await statements.start(connection, keyPrefix: "order-", index: index, groups: 16, nowMs: now, logger: logger)
                }
            }
        }
        let rawHandling = try await timed {
            for index in 0..<count {
                try await raw.withTransaction(logger: logger) { connection in
                    try await connection.query(
                        PostgresRaw.query("INSERT INTO \(rawPrefix)effects VALUES ($1, 1)", [.text("order-\(index)")]),
                        logger: logger)
                    try await connection.query(
                        PostgresRaw.query(
                            "UPDATE \(rawPrefix)countdown_consumers SET last_event_id = $1, updated_at_ms = $2 WHERE name = 'closer'",
                            [.int(Int64(index + 1)), .int(now)]),
                        logger: logger)
                }
            }
        }
        return [
            Figure(
                name: "PostgreSQL: an order with its deadline in the host's transaction", n: count,
                ours: Double(count) / placing, raw: Double(count) / rawPlacing, unit: "commits/s", target: .unjudged),
            Figure(
                name: "PostgreSQL: an expiry's effect with its acknowledgement in the host's transaction", n: count,
                ours: Double(count) / handling, raw: Double(count) / rawHandling, unit: "commits/s", target: .unjudged),
        ]
    }
}
