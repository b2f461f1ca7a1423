import Foundation
import Logging
import PostgresNIO
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite
@testable import CountdownStorePostgres

/// A database engine the behaviour suites run on: its name, and how a fixture opens a store on it
/// (a file of the fixture's folder, or a schema of the test server's database).
///
/// Every parameterised behaviour test (`arguments: TestEngine.all`) runs once on each engine of
/// ``all``: a new engine runs them all once it is defined here and is one more entry of that list.
struct TestEngine: Sendable, Hashable, CustomStringConvertible, CustomTestStringConvertible {
    /// The engine's name, in test names and reports.
    let name: String
    /// Opens the fixture's store with a configuration.
    let open: @Sendable (Fixture, CountdownStore.Configuration) async throws -> CountdownStore

    static let sqlite = TestEngine(name: "sqlite") { fixture, configuration in
        try CountdownStore(path: fixture.path, configuration: configuration)
    }

    static let postgres = TestEngine(name: "postgres") { fixture, configuration in
        try await PostgresFixtures.open(schema: fixture.schema, configuration: configuration)
    }

    /// Every engine.
    static let all: [TestEngine] = [.sqlite, .postgres]

    var description: String { name }
    var testDescription: String { name }

    static func == (left: TestEngine, right: TestEngine) -> Bool { left.name == right.name }
    func hash(into hasher: inout Hasher) { hasher.combine(name) }
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
            client: try client(), schema: schema, place: "schema \(schema)", wakeUps: .pollOnly,
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
