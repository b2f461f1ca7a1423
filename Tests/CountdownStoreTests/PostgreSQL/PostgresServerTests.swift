import Foundation
import PostgresNIO
import Testing

/// The suites' PostgreSQL server answers, directly and through PgBouncer in transaction pooling.
@Suite("PostgreSQL test server", .timeLimit(.minutes(2)))
struct TestServerTests {
    @Test("The server answers through postgres-nio")
    func serverAnswers() async throws {
        let server = try TestPostgres.shared()
        let version = try await server.withClient { client in
            let rows = try await client.query("SELECT current_setting('server_version_num')::int")
            var versions: [Int] = []
            for try await version in rows.decode(Int.self) { versions.append(version) }
            return versions
        }
        #expect(version.first.map { $0 >= 150_000 } == true, "PostgreSQL 15 or newer: \(version)")
    }

    @Test("PgBouncer in transaction pooling forwards to the server")
    func pgBouncerForwards() async throws {
        let server = try TestPostgres.shared()
        guard server.folder != nil else { return }  // an existing server: no PgBouncer of ours
        let port = try server.pgBouncerPort()
        var configuration = server.configuration()
        configuration = .init(host: "127.0.0.1", port: port, username: "anyone", password: nil, database: server.database, tls: .disable)
        let client = PostgresClient(configuration: configuration)
        let answer = try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            let rows = try await client.query("SELECT 41 + 1")
            var answers: [Int] = []
            for try await answer in rows.decode(Int.self) { answers.append(answer) }
            return answers
        }
        #expect(answer == [42])
    }
}
