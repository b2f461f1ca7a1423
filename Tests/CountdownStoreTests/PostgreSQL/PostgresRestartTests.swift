import Foundation
import Logging
import PostgresNIO
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite
@testable import CountdownStorePostgres

@Suite("PostgreSQL server restarts", .enabled(if: TestPostgres.serverBinariesAvailable), .timeLimit(.minutes(2)))
struct PostgresRestartTests {
    /// How many server processes wait for a lock.
    private func waitingForLocks(_ client: PostgresClient) async throws -> Int {
        try await client.query("SELECT count(*)::bigint FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
            .decode(Int64.self).first { _ in true }.map(Int.init) ?? 0
    }

    /// Runs `body` with a store in a new schema of a server of its own, removed afterwards.
    private func withDedicatedStore(
        wakeUps: PostgresWakeUps = .pollOnly, configuration: CountdownStore.Configuration,
        _ body: (TestPostgres, PostgresClient, String, CountdownStore) async throws -> Void
    ) async throws {
        let server = try TestPostgres.dedicated()
        defer { server.discard() }
        try await server.withClient { client in
            let schema = PostgresFixtures.newSchema()
            let store = try await CountdownStore(
                client: client, schema: schema, place: "schema \(schema)", wakeUps: wakeUps,
                configuration: configuration, databaseClock: false)
            try await body(server, client, schema, store)
        }
    }

    @Test("A ticker whose heartbeat is cut by a fast server restart keeps running, heartbeats again and expires the item afterwards")
    func tickerRidesOutAServerRestart() async throws {
        let clock = VirtualClock()
        let records = RecordingLogHandler.Records()
        let configuration = CountdownStore.Configuration(
            clock: clock, logger: Logger(label: "restart") { _ in RecordingLogHandler(records: records) })
        try await withDedicatedStore(wakeUps: .notifications, configuration: configuration) { server, client, schema, store in
            let running = await RunningTicker(store)
            try await store.start("after-restart", duration: .seconds(5))
            await running.advance(clock, by: .seconds(1))
            guard case .held = running.ticker.leaseStatus else {
                Issue.record("the ticker holds the lease: \(String(describing: running.ticker.leaseStatus))")
                return
            }

            // A session of the test's own holds the clock row, so that the ticker's next
            // heartbeat is under way on the server, waiting for the lock, when the server restarts.
            let (release, releaseNow) = AsyncStream.makeStream(of: Void.self)
            let locked = Locked(false)
            let holder = Task {
                try await server.withClient { other in
                    try await other.withConnection { connection in
                        _ = try await connection.query("BEGIN", logger: Logger(label: "restart-test"))
                        _ = try await connection.query(
                            PostgresQuery(unsafeSQL: "SELECT 1 FROM \"\(schema)\".countdown_clock WHERE id = 1 FOR UPDATE"),
                            logger: Logger(label: "restart-test"))
                        locked.withLock { $0 = true }
                        for await _ in release {}
                    }
                }
            }
            try await eventually("the test holds the clock row") { locked.withLock { $0 } }
            clock.advance(by: .seconds(1))  // a heartbeat is due
            try await eventually("the ticker's heartbeat waits for the clock row") { try await waitingForLocks(client) >= 1 }

            try await onThread { Result { try server.pgCtl(["restart", "-m", "fast"]) } }.get()
            releaseNow.finish()
            _ = await holder.result  // its session ended with the restart

            // Time moves on past the deadline: the ticker reconnects and records the expiry.
            try await eventually("the ticker expired the item after the restart", limit: 60) {
                await running.advance(clock, by: .milliseconds(250))
                // (The test's own read may meet a connection the restart closed: it looks again.)
                return (try? await events(store, kind: "expired"))?.count == 1
            }
            #expect(try await events(store, key: "after-restart", kind: "expired").count == 1)
            #expect(try await store.countdown("after-restart")?.state == .expired)
            let warnings = records.all.filter { $0.0 == .warning }.map(\.1)
            #expect(warnings.contains("lost the database connection; trying again"), "the lost connection was logged: \(warnings)")
            #expect(records.all.contains { $0.1 == "connected to the database again" })
            guard case .held = running.ticker.leaseStatus else {
                Issue.record("the ticker runs and holds the lease again: \(String(describing: running.ticker.leaseStatus))")
                return
            }
            try await running.stop()
            try await store.close()
        }
    }

    @Test("A store whose connections the server terminated reads, writes and closes without an error")
    func terminatedConnectionsAreReplaced() async throws {
        try await withDedicatedStore(configuration: CountdownStore.Configuration(clock: VirtualClock())) { server, _, _, store in
            try await store.heartbeat()
            try await store.start("a", duration: .minutes(1))
            let mailer = try await store.consumer("mailer")
            var events = try await mailer.events().makeAsyncIterator()
            #expect(try await events.next()?.key == "a", "the reader claimed the first event")

            try await server.withClient { other in
                // Every other session ends: the store's, and any other one of this client's pool.
                let cut = try await other.query(
                    """
                    WITH others AS MATERIALIZED (
                        SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend')
                    SELECT pid FROM others WHERE pg_terminate_backend(pid)
                    """
                ).decode(Int32.self).reduce(into: [Int32]()) { $0.append($1) }
                #expect(!cut.isEmpty, "the store had sessions to cut")
                // Those sessions, not the ones opened since (a pool may connect again at once), are gone.
                let list = cut.map(String.init).joined(separator: ",")
                try await eventually("the store's sessions ended") {
                    try await other.query(PostgresQuery(unsafeSQL: "SELECT count(*)::bigint FROM pg_stat_activity WHERE pid IN (\(list))"))
                        .decode(Int64.self).first { _ in true } == 0
                }
            }
            #expect(try await store.countdown("a")?.state == .running)
            try await store.start("b", duration: .minutes(1))
            try await store.close()
        }
    }

    @Test("A store closes, with a warning, while its server is down: its lease runs out by itself")
    func closesWhileTheServerIsDown() async throws {
        let records = RecordingLogHandler.Records()
        let configuration = CountdownStore.Configuration(
            clock: VirtualClock(), logger: Logger(label: "down") { _ in RecordingLogHandler(records: records) })
        try await withDedicatedStore(configuration: configuration) { server, _, _, store in
            try await store.heartbeat()
            try await onThread { Result { try server.pgCtl(["stop", "-m", "fast"]) } }.get()
            try await store.close()
            let warnings = records.all.filter { $0.0 == .warning }.map(\.1)
            #expect(
                warnings.contains { $0.hasPrefix("could not write the final heartbeat and give up the lease while closing") && $0.hasSuffix("they run out by themselves") },
                "\(warnings)")
        }
    }

    @Test("A store whose final writes fail for another reason than the connection reports it from close()")
    func closeReportsAFailureOfTheData() async throws {
        try await withDedicatedStore(configuration: CountdownStore.Configuration(clock: VirtualClock())) { _, client, schema, store in
            try await store.heartbeat()
            _ = try await client.query(PostgresQuery(unsafeSQL: "DROP TABLE \"\(schema)\".countdown_lease CASCADE"))
            let error = await expectError(.storageFailure) { try await store.close() }
            #expect(error?.isTransient == false, "\(String(describing: error))")
        }
    }
}
