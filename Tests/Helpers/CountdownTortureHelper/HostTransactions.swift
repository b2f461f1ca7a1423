import CountdownStore
import CountdownStoreCore
import CountdownStorePostgres
import Foundation
import GRDB
import Logging
import PostgresNIO

/// The host-transaction crash workload: orders placed with their deadlines in one transaction,
/// and each expiry's effect written with its acknowledgement in one, on SQLite (the host's GRDB
/// database is the store's) or PostgreSQL (the host's connections are the store's pool's).
///
/// Prints `placed KEY` once an order and its countdown committed, and `handled KEY#GENERATION`
/// once an effect and its acknowledgement did. With `drain`, places nothing, handles until every
/// countdown has expired and been handled, prints `drained`, and exits.
enum HostTransactionWorkload {
    static let configuration = CountdownStore.Configuration(
        heartbeatInterval: .milliseconds(100), leaseDuration: .milliseconds(300), claimTimeout: .seconds(1))

    /// `location`: a file's path, or `pg:HOST:PORT:USER:DATABASE:SCHEMA` (a password, if any, in
    /// `COUNTDOWN_HELPER_PGPASSWORD`).
    static func run(_ location: String, tag: String, drain: Bool) async throws {
        if location.hasPrefix("pg:") {
            try await runOnPostgres(location, tag: tag, drain: drain)
        } else {
            try await runOnSQLite(location, tag: tag, drain: drain)
        }
    }

    // MARK: SQLite

    static func runOnSQLite(_ path: String, tag: String, drain: Bool) async throws {
        var grdb = GRDB.Configuration()
        grdb.busyMode = .timeout(10)
        let database = try DatabasePool(path: path, configuration: grdb)
        try await database.write { db in
            try db.execute(sql: "CREATE TABLE IF NOT EXISTS orders (key TEXT PRIMARY KEY)")
            try db.execute(sql: "CREATE TABLE IF NOT EXISTS effects (key TEXT NOT NULL, generation INTEGER NOT NULL)")
        }
        let store = try CountdownStore(database: database, configuration: configuration)
        let ticker = CountdownTicker(store: store)
        Task { try await ticker.run() }
        let consumer = try await store.consumer("closer")
        let handling = Task {
            for try await expiry in try await consumer.events(.expiries) {
                let id = "\(expiry.key ?? "")#\(expiry.generation ?? 0)"
                do {
                    try await database.write { db in
                        try db.execute(
                            sql: "INSERT INTO effects (key, generation) VALUES (?, ?)",
                            arguments: [expiry.key, expiry.generation])
                        try store.transaction(in: db).acknowledge(expiry, of: consumer)
                    }
                    say("handled \(id)")
                } catch let error as CountdownError where error.code == .claimLost {
                    say("lost \(id)")
                }
            }
        }
        if drain {
            try await waitUntilDrained(store, consumer) {
                try await database.read { db in
                    try Int.fetchOne(db, sql: "SELECT count(*) FROM countdowns WHERE state <> 'expired'") ?? 0
                }
            }
            handling.cancel()
            say("drained")
            return
        }
        for index in 0... {
            let key = "\(tag)-\(index)"
            try await database.write { db in
                try db.execute(sql: "INSERT INTO orders (key) VALUES (?)", arguments: [key])
                try store.transaction(in: db).start(key, duration: .milliseconds(Int64.random(in: 20...400)))
            }
            say("placed \(key)")
        }
    }

    // MARK: PostgreSQL

    static func runOnPostgres(_ url: String, tag: String, drain: Bool) async throws {
        let parts = url.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 6, let port = Int(parts[2]) else { throw HelperFailure("bad location \(url)") }
        let schema = parts[5]
        let configuration = PostgresClient.Configuration(
            host: parts[1], port: port, username: parts[3],
            password: ProcessInfo.processInfo.environment["COUNTDOWN_HELPER_PGPASSWORD"], database: parts[4],
            tls: .disable)
        let client = PostgresClient(configuration: configuration, backgroundLogger: Logger(label: "host"))
        Task { await client.run() }
        let logger = Logger(label: "host")
        try await client.query(
            PostgresQuery(unsafeSQL: "CREATE SCHEMA IF NOT EXISTS \(schema)"), logger: logger)
        try await client.query(
            PostgresQuery(unsafeSQL: "CREATE TABLE IF NOT EXISTS \(schema).orders (key text PRIMARY KEY)"), logger: logger)
        try await client.query(
            PostgresQuery(
                unsafeSQL: "CREATE TABLE IF NOT EXISTS \(schema).effects (key text NOT NULL, generation bigint NOT NULL)"),
            logger: logger)
        let store = try await CountdownStore(client: client, schema: schema, configuration: Self.configuration)
        let ticker = CountdownTicker(store: store)
        Task { try await ticker.run() }
        let consumer = try await store.consumer("closer")
        let effects = "\(schema).effects"
        let handling = Task {
            for try await expiry in try await consumer.events(.expiries) {
                let id = "\(expiry.key ?? "")#\(expiry.generation ?? 0)"
                do {
                    try await client.withConnection { connection in
                        try await store.transaction(on: connection) { tx in
                            try await connection.query(
                                "INSERT INTO \(unescaped: effects) VALUES (\(expiry.key ?? ""), \(expiry.generation ?? 0))",
                                logger: logger)
                            try await tx.acknowledge(expiry, of: consumer)
                        }
                    }
                    say("handled \(id)")
                } catch let error as CountdownError where error.code == .claimLost {
                    say("lost \(id)")
                }
            }
        }
        if drain {
            try await waitUntilDrained(store, consumer) {
                let rows = try await client.query(
                    PostgresQuery(unsafeSQL: "SELECT count(*)::bigint FROM \(schema).countdowns WHERE state <> 'expired'"),
                    logger: logger)
                for try await count in rows.decode(Int64.self) { return Int(count) }
                return 0
            }
            handling.cancel()
            say("drained")
            return
        }
        let orders = "\(schema).orders"
        for index in 0... {
            let key = "\(tag)-\(index)"
            try await client.withConnection { connection in
                try await store.transaction(on: connection) { tx in
                    try await connection.query("INSERT INTO \(unescaped: orders) VALUES (\(key))", logger: logger)
                    try await tx.start(key, duration: .milliseconds(Int64.random(in: 20...400)))
                }
            }
            say("placed \(key)")
        }
    }

    /// Waits until no countdown is left to expire and the consumer has acknowledged every event.
    static func waitUntilDrained(
        _ store: CountdownStore, _ consumer: EventConsumer, unexpired: () async throws -> Int
    ) async throws {
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline {
            let last = try await store.recentEvents(limit: 1).first?.id ?? 0
            if try await unexpired() == 0, try await consumer.acknowledgedThrough() >= last { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw HelperFailure("not drained within 120 s")
    }
}

struct HelperFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

