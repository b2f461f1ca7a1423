import Foundation
import Testing

@testable import CountdownStoreCore

/// What the ticker says of its loop's progress, for watchdogs and readiness: `lastPassAge` and
/// `completedPasses`, on virtual time.
@Suite("Ticker progress")
struct TickerProgressTests {
    @Test("lastPassAge is nil until the ticker runs, grows on the boot clock while the loop sleeps, and is nil again once it stops")
    func lastPassAge() async throws {
        let fixture = try Fixture()
        let store = try await fixture.open()
        let idle = CountdownTicker(store: store)
        #expect(idle.lastPassAge == nil && idle.completedPasses == 0)

        let running = await RunningTicker(store)
        let ticker = running.ticker
        #expect(ticker.completedPasses >= 1, "idle after its first pass")
        #expect(ticker.lastPassAge == .zero, "the pass began at this instant of the virtual clock")
        // Less than the poll interval (250 ms): the loop sleeps on, its last pass ages.
        fixture.clock.advance(by: .milliseconds(100))
        #expect(ticker.lastPassAge == .milliseconds(100))
        let passes = ticker.completedPasses
        await running.advance(fixture.clock, by: .milliseconds(200))
        #expect(ticker.lastPassAge == .zero, "woken at the poll, it began a pass at once")
        #expect(ticker.completedPasses > passes)

        try await running.stop()
        #expect(ticker.lastPassAge == nil && ticker.completedPasses == 0)
        try await store.close()
    }
}
