import Foundation
import Logging
import ServiceLifecycle
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

@Suite("Ticker in a ServiceGroup")
struct ServiceGroupTests {
    /// A service of the host's that runs until the group shuts down.
    struct HostService: Service {
        func run() async throws {
            try await gracefulShutdown()
        }
    }

    @Test("A graceful shutdown of the group stops the ticker with a final heartbeat and a freed lease", arguments: TestEngine.all)
    func gracefulShutdownWritesAFinalHeartbeat(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.start("screen", duration: .minutes(5), policy: .active)
        let ticker = CountdownTicker(store: store)
        let group = ServiceGroup(services: [ticker, HostService()], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        await ticker.waitUntilIdle()
        for _ in 0..<6 {
            fixture.clock.advance(by: .milliseconds(500))
            await ticker.waitUntilIdle()
        }
        if case .held = ticker.leaseStatus {} else { Issue.record("the ticker should hold the lease") }

        await group.triggerGracefulShutdown()
        try await running.value
        let status = try await store.clockStatus()
        #expect(status.leaseHolder == nil)
        #expect(try await store.countdown("screen")?.elapsed == .seconds(3))
        fixture.clock.advance(by: .minutes(1))
        #expect(try await store.countdown("screen")?.elapsed == .seconds(3), "nothing counts once the host is gone")
    }

    @Test("A ticker refuses to run twice at once", arguments: TestEngine.all)
    func tickerRunsOnce(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let running = await RunningTicker(try await fixture.open())
        await expectError(.wrongState) { try await running.ticker.run() }
        try await running.stop()
    }
}
