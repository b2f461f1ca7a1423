import Foundation
import GRDB
import PostgresNIO
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

/// A store through months of steady traffic with unique keys, on virtual time: every table's rows
/// and the SQLite file stop growing once retention has caught up.
///
/// Size: `COUNTDOWN_YEAR_DAYS` days (60 in CI) of `COUNTDOWN_YEAR_ORDERS` orders a day (480 in
/// CI); the long form is 365 days of 20,000 orders a day. On PostgreSQL a tenth of the orders.
@Suite("A year of traffic")
struct YearOfTrafficTests {
    /// What is measured at the end of a day.
    struct Sizes: Sendable, CustomStringConvertible {
        var rows: [String: Int]
        var fileBytes: Int

        var description: String {
            rows.keys.sorted().map { "\($0) \(rows[$0] ?? 0)" }.joined(separator: ", ") + ", file \(fileBytes) B"
        }
    }

    static let tables = [
        "countdowns", "countdown_events", "countdown_retired_keys", "countdown_consumers", "countdown_consumer_claims",
    ]

    @Test("Steady traffic with unique keys: rows and the file plateau (after day 30 within 1.2× of day 30)", arguments: TestEngine.all)
    func plateau(engine: TestEngine) async throws {
        let days = suiteSize("COUNTDOWN_YEAR_DAYS", ci: 60)
        let perDay = suiteSize("COUNTDOWN_YEAR_ORDERS", ci: 480) / (engine == .postgres ? 10 : 1)
        let perHour = max(1, perDay / 24)
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let consumer = try await store.consumer("fulfilment")
        var generator = SeededGenerator(state: 2026)
        var next = 0
        var lastHour: [String] = []
        var byDay: [Sizes] = []
        for day in 1...days {
            for _ in 0..<24 {
                // Orders placed this hour, each paid (cancelled) or expiring within the hour.
                let keys = (0..<perHour).map { _ in
                    defer { next += 1 }
                    return "order-\(next)"
                }
                try await store.start(keys.map { .countdown($0, duration: .seconds(Int64.random(in: 600...3000, using: &generator))) })
                for key in lastHour where Int.random(in: 0..<10, using: &generator) == 0 {
                    _ = try? await store.cancel(key)
                }
                lastHour = keys
                fixture.clock.advance(by: .seconds(3600))
                try await store.expireDue()
                try await consumer.acknowledge(through: try await store.lastEventID())
                _ = try await store.applyRetention()
            }
            byDay.append(try await Self.sizes(store, fixture))
            if day == 30 || day == days {
                print("\(engine) day \(day) (\(perDay) orders a day): \(byDay[day - 1])")
            }
        }
        let reference = byDay[29]
        for (index, sizes) in byDay.enumerated().dropFirst(30) {
            for table in Self.tables {
                let limit = max(Double(reference.rows[table] ?? 0) * 1.2, 2)
                #expect(Double(sizes.rows[table] ?? 0) <= limit, "day \(index + 1): \(table) \(sizes.rows[table] ?? 0) rows, day 30 \(reference.rows[table] ?? 0)")
            }
            if engine == .sqlite {
                #expect(Double(sizes.fileBytes) <= Double(reference.fileBytes) * 1.2, "day \(index + 1): \(sizes.fileBytes) B, day 30 \(reference.fileBytes) B")
            }
        }
        #expect(next == days * 24 * perHour)
        try await store.close()
    }

    /// Row counts of every table that could grow, and the SQLite file's size after a checkpoint.
    static func sizes(_ store: CountdownStore, _ fixture: Fixture) async throws -> Sizes {
        if fixture.engine == .sqlite {
            _ = try await store.checkpointWAL()
            let rows = try await store.grdb.read { db in
                try Dictionary(uniqueKeysWithValues: tables.map { ($0, try Int.fetchOne(db, sql: "SELECT count(*) FROM \($0)") ?? 0) })
            }
            let attributes = try FileManager.default.attributesOfItem(atPath: fixture.path)
            return Sizes(rows: rows, fileBytes: (attributes[.size] as? Int) ?? 0)
        } else {
            let schema = fixture.schema
            let rows = try await TestPostgres.shared().withClient { client in
                var rows: [String: Int] = [:]
                for table in tables {
                    let result = try await client.query(PostgresQuery(unsafeSQL: "SELECT count(*) FROM \"\(schema)\".\(table)"))
                    for try await count in result.decode(Int64.self) { rows[table] = Int(count) }
                }
                return rows
            }
            return Sizes(rows: rows, fileBytes: 0)
        }
    }
}
