import Foundation
import GRDB
import Logging
import PostgresNIO
import Testing

@testable import CountdownStoreCore

/// SIGKILL of a host that places orders with their deadlines in its own transactions and writes
/// each expiry's effect with its acknowledgement: at random instants, again and again on one
/// database, on both engines. Afterwards (a last process drains what is due): no order without
/// its countdown nor a countdown without its order, no placed order lost, and every expiry's
/// effect there exactly once.
@Suite("Crash (host transactions)")
struct HostTransactionCrashTests {
    /// What the kills left: the orders, the countdowns, the effects by expiry.
    struct Stored {
        var orders: Set<String>
        var countdowns: [String: Int64]  // key: its generation (each expired)
        var effects: [String: Int]  // KEY#GENERATION: how many
    }

    /// Kills the workload at random instants on `location`, drains, and checks what is stored.
    private func killAndCheck(
        _ engine: String, location: String, environment: [String: String] = [:], stored: () async throws -> Stored
    ) async throws {
        let cycles = suiteSize("COUNTDOWN_HOST_CRASH_CYCLES", ci: 10)
        var placed = Set<String>()
        var handled = 0
        for cycle in 0..<cycles {
            let worker = try HelperProcess(["hostcrash", location, "c\(cycle)"], environment: environment)
            try await Task.sleep(for: .milliseconds(Int.random(in: 400...1200)))
            worker.kill()
            for line in await worker.finish(status: nil) {
                let fields = line.split(separator: " ")
                guard fields.count == 2 else { continue }
                if fields[0] == "placed" { placed.insert(String(fields[1])) }
                if fields[0] == "handled" { handled += 1 }
            }
        }
        let drain = try HelperProcess(["hostdrain", location], environment: environment)
        let drained = await drain.finish(limit: 150)
        #expect(drained.contains("drained"), "the last process drained what was due: \(drained.suffix(3)), \(drain.stderr.suffix(800))")

        let found = try await stored()
        let keys = Set(found.countdowns.keys)
        let orphanOrders = found.orders.subtracting(keys)
        let orphanCountdowns = keys.subtracting(found.orders)
        let lost = placed.subtracting(found.orders)
        #expect(orphanOrders.isEmpty, "orders without their countdown: \(orphanOrders.sorted().prefix(10))")
        #expect(orphanCountdowns.isEmpty, "countdowns without their order: \(orphanCountdowns.sorted().prefix(10))")
        #expect(lost.isEmpty, "placed orders lost: \(lost.sorted().prefix(10))")
        var twice = 0
        var missing = 0
        for (key, generation) in found.countdowns {
            let count = found.effects["\(key)#\(generation)"] ?? 0
            if count > 1 { twice += 1 }
            if count == 0 { missing += 1 }
        }
        #expect(twice == 0, "\(twice) expiries took effect twice")
        #expect(missing == 0, "\(missing) expiries took no effect")
        #expect(placed.count > cycles, "the workers got work done")
        let report =
            "host transaction crash suite (\(engine)): \(cycles) kills, \(placed.count) orders placed and "
                + "acknowledged, \(found.orders.count) stored (\(found.orders.count - placed.count) committed but not "
                + "acknowledged before a kill), orphans \(orphanOrders.count + orphanCountdowns.count), lost "
                + "\(lost.count); \(found.countdowns.count) expiries, \(handled) handled before kills, effects twice "
                + "\(twice), missing \(missing)"
        print(report)
        fleetReport(report)
    }

    @Test("SQLite: SIGKILL while orders are placed with their deadlines and expiries handled with their acknowledgements: no orphan, nothing lost, no effect twice")
    func sqlite() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path()
        try await killAndCheck("sqlite", location: path) {
            let queue = try DatabaseQueue(path: path)
            defer { try? queue.close() }
            return try await queue.read { db in
                #expect(try String.fetchAll(db, sql: "PRAGMA integrity_check") == ["ok"])
                return Stored(
                    orders: Set(try String.fetchAll(db, sql: "SELECT key FROM orders")),
                    countdowns: Dictionary(
                        uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT key, generation FROM countdowns").map {
                            ($0["key"] as String, $0["generation"] as Int64)
                        }),
                    effects: Dictionary(
                        try Row.fetchAll(db, sql: "SELECT key, generation FROM effects").map {
                            ("\($0["key"] as String)#\($0["generation"] as Int64)", 1)
                        }, uniquingKeysWith: +))
            }
        }
    }

    @Test("PostgreSQL: SIGKILL while orders are placed with their deadlines and expiries handled with their acknowledgements: no orphan, nothing lost, no effect twice")
    func postgres() async throws {
        let server = try TestPostgres.shared()
        let schema = PostgresFixtures.newSchema()
        let location = "pg:\(server.host):\(server.port):\(server.username):\(server.database):\(schema)"
        var environment: [String: String] = [:]
        if let password = server.password { environment["COUNTDOWN_HELPER_PGPASSWORD"] = password }
        let client = try PostgresFixtures.client()
        try await killAndCheck("postgres", location: location, environment: environment) {
            func texts(_ sql: String) async throws -> [String] {
                var values: [String] = []
                for try await value in try await client.query(PostgresQuery(unsafeSQL: sql)).decode(String.self) {
                    values.append(value)
                }
                return values
            }
            let countdowns = try await texts("SELECT key || '#' || generation FROM \(schema).countdowns")
            return Stored(
                orders: Set(try await texts("SELECT key FROM \(schema).orders")),
                countdowns: Dictionary(
                    uniqueKeysWithValues: countdowns.map { text in
                        let parts = text.split(separator: "#")
                        return (String(parts[0]), Int64(parts[1]) ?? 0)
                    }),
                effects: Dictionary(
                    try await texts("SELECT key || '#' || generation FROM \(schema).effects").map { ($0, 1) },
                    uniquingKeysWith: +))
        }
    }
}
