import Foundation
import Logging
import PostgresNIO
import Testing

@testable import CountdownStore
@testable import CountdownStorePostgres

/// The database engines the behaviour suites run on: every parameterised test runs once on each.
enum TestEngine: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    /// Both engines.
    static let all = TestEngine.allCases

    var testDescription: String { rawValue }
}

/// The PostgreSQL stores of the behaviour suites: each fixture gets a schema of its own in the
/// test server's database, on one connection pool the whole test process shares.
enum PostgresFixtures {
    private static let shared: Result<PostgresClient, any Error> = Result {
        let server = try TestPostgres.shared()
        var configuration = server.configuration()
        configuration.options.maximumConnections = 40
        let client = PostgresClient(configuration: configuration, backgroundLogger: Logger(label: "countdown-tests"))
        Task.detached { await client.run() }
        return client
    }

    /// The shared pool, running.
    static func client() throws -> PostgresClient {
        try shared.get()
    }

    /// A new schema name for one fixture.
    static func newSchema() -> String {
        "t_" + UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: "")
    }

    /// Opens the store in `schema` with the configuration's clock standing in for the server's
    /// (the suites run on virtual time).
    static func open(schema: String, configuration: CountdownStore.Configuration) async throws -> CountdownStore {
        try await CountdownStore(
            client: try client(), schema: schema, place: "schema \(schema)", runner: nil, wakeUps: .pollOnly,
            configuration: configuration, databaseClock: false)
    }

    /// Every row of every table of `schema`, as text, in a stable order.
    static func snapshot(schema: String) async throws -> [String] {
        var lines: [String] = []
        for table in ["countdowns", "countdown_clock", "countdown_lease", "countdown_events", "countdown_consumers", "countdown_migrations"] {
            let rows = try await client().query(
                PostgresQuery(unsafeSQL: "SELECT row_to_json(t)::text FROM \"\(schema)\".\(table) AS t ORDER BY 1"))
            for try await (text) in rows.decode(String.self) { lines.append("\(table): \(text)") }
        }
        return lines
    }
}
