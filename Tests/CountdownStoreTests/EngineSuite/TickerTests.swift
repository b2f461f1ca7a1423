import Foundation
import Testing

@testable import CountdownStoreCore

/// The ticker on every engine: an expiry at its deadline, never early; woken at once by a write of
/// its process, noticing another process's within 250 ms; catching up at start-up; subscriptions
/// that end with their task; suspend and resume; a final heartbeat; one lease holder of two tickers.
@Suite("Ticker")
struct TickerTests {
    @Test("Expiry fires at the deadline, never early, in one transaction with its event", arguments: TestEngine.all)
    func expiryFiresAtTheDeadlineNeverEarly(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let running = await RunningTicker(store)
        try await store.start("otp", duration: .seconds(10), group: "codes", payload: .text("1234"))
        await running.advance(fixture.clock, by: .milliseconds(9_999))
        #expect(try await store.countdown("otp")?.state == .running)
        #expect(try await events(store, kind: "expired").isEmpty)
        await running.advance(fixture.clock, by: .milliseconds(1))
        let item = try #require(try await store.countdown("otp"))
        #expect(item.state == .expired)
        let expiry = try #require(try await events(store, key: "otp", kind: "expired").first)
        #expect(expiry.lateMs == 0 && expiry.generation == 1)
        #expect(expiry.deadlineAtMs == item.startedAt.millisecondsSince1970 + 10_000)
        try await running.stop()
    }

    @Test("A write in the same process that moves the next deadline earlier wakes the ticker at once", arguments: TestEngine.all)
    func sameProcessWriteWakesTheTicker(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.start("later", duration: .hours(1))
        let running = await RunningTicker(store)
        try await store.start("soon", duration: .milliseconds(7))
        await running.ticker.waitUntilIdle()
        await running.advance(fixture.clock, by: .milliseconds(7), step: .milliseconds(7))
        let expiry = try #require(try await events(store, key: "soon", kind: "expired").first)
        #expect(expiry.lateMs == 0, "woken for the new deadline, not at the next periodic check")
        try await running.stop()
    }

    @Test("Another process's write is noticed within 250 ms", arguments: TestEngine.all)
    func otherProcessWriteIsNoticed(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let other = try await fixture.open()  // another instance: its writes do not signal this one
        let running = await RunningTicker(store)
        fixture.clock.advance(by: .milliseconds(40))
        try await other.start("cli", duration: .milliseconds(5))
        await running.advance(fixture.clock, by: .milliseconds(300), step: .milliseconds(1))
        let expiry = try #require(try await events(store, key: "cli", kind: "expired").first)
        #expect(try #require(expiry.lateMs) <= 250)
        try await running.stop()
    }

    @Test("Items that came due while nothing ran expire once at start-up, oldest first, with their real lateness", arguments: TestEngine.all)
    func catchUpAtStartUp(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        do {
            let store = try await fixture.openTicking()
            try await store.start("c", duration: .minutes(5))
            try await store.start("a", duration: .seconds(1))
            try await store.start("b", duration: .seconds(2))
            try await store.start("d", duration: .hours(1))
            try await store.close()
        }
        fixture.clock.reboot(after: .minutes(10))
        let store = try await fixture.open()
        let running = await RunningTicker(store)
        let expiries = try await events(store, kind: "expired")
        #expect(expiries.map(\.key) == ["a", "b", "c"])
        #expect(expiries.map(\.lateMs) == [599_000, 598_000, 300_000])
        await running.advance(fixture.clock, by: .seconds(5))
        #expect(try await events(store, kind: "expired").count == 3, "each expired once")
        try await running.stop()
    }

    @Test("Cancelling the consuming task ends the subscription", arguments: TestEngine.all)
    func cancellingEndsTheSubscription(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.start("a", duration: .minutes(1))
        let running = await RunningTicker(store)
        let ticks = try running.ticker.ticks(keys: ["a"], every: .milliseconds(500))
        let consumer = Task {
            var count = 0
            for await _ in ticks { count += 1 }
            return count
        }
        await running.advance(fixture.clock, by: .seconds(2))
        #expect(running.ticker.subscriptionCount == 1)
        consumer.cancel()
        _ = await consumer.value
        #expect(running.ticker.subscriptionCount == 0)
        try await running.stop()
    }

    @Test("suspend() and resume() stop and restart active time while the ticker runs", arguments: TestEngine.all)
    func suspendAndResumeWithTheTicker(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.start("screen", duration: .minutes(1), policy: .active)
        try await store.start("pay", duration: .minutes(1), policy: .wall)
        let running = await RunningTicker(store)
        await running.advance(fixture.clock, by: .seconds(10))
        try await store.enterBackground()
        await running.advance(fixture.clock, by: .seconds(55))
        #expect(try await store.countdown("pay")?.state == .expired)
        #expect(try await store.countdown("screen")?.remaining == .seconds(50))
        try await store.enterForeground()
        await running.advance(fixture.clock, by: .seconds(50))
        #expect(try await store.countdown("screen")?.state == .expired)
        #expect(try await events(store, key: "screen", kind: "expired").first?.lateMs == 0)
        try await running.stop()
    }

    @Test("Stopping the ticker writes a final heartbeat and frees the lease", arguments: TestEngine.all)
    func stoppingWritesAFinalHeartbeat(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.start("screen", duration: .minutes(1), policy: .active)
        let running = await RunningTicker(store)
        await running.advance(fixture.clock, by: .milliseconds(1700))
        try await running.stop()
        let status = try await store.clockStatus()
        #expect(status.leaseHolder == nil)
        #expect(status.lastHeartbeat == Date(millisecondsSince1970: status.now.wall))
        fixture.clock.advance(by: .hours(1))
        #expect(try await store.countdown("screen")?.elapsed == .milliseconds(1700), "nothing lost, nothing counted after")
    }

    @Test("Of two tickers on one database, one holds the lease; the other takes over when it stops", arguments: TestEngine.all)
    func oneTickerHoldsTheLease(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let first = await RunningTicker(try await fixture.open())
        let second = await RunningTicker(try await fixture.open())
        await first.advance(fixture.clock, by: .seconds(3))
        await second.ticker.waitUntilIdle()
        let holders = [first, second].filter { if case .held = $0.ticker.leaseStatus { true } else { false } }
        #expect(holders.count == 1)
        try await holders[0].stop()
        let standby = holders[0].ticker === first.ticker ? second : first
        await standby.advance(fixture.clock, by: .seconds(2))
        if case .held = standby.ticker.leaseStatus {} else { Issue.record("the standby ticker did not take over") }
        try await standby.stop()
    }
}
