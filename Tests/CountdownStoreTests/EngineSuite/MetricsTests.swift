import Foundation
import MetricsTestKit
import Testing

@testable import CountdownStoreCore

/// What a store reports through swift-metrics on every engine, read from swift-metrics' own test
/// backend: each operation counted once its write commits, never for one rolled back; the ticker's
/// expiries, the lease and the gauges; what retention pruned.
@Suite("Metrics")
struct MetricsTests {
    /// A fixture whose store reports to a test backend of its own.
    static func fixture(_ engine: TestEngine, groups: Bool = false) throws -> (Fixture, TestMetrics) {
        var fixture = try Fixture(engine: engine)
        let metrics = TestMetrics()
        fixture.configuration.metrics = .init(factory: metrics, groupDimension: groups, gaugeInterval: .seconds(5))
        return (fixture, metrics)
    }

    static func total(_ metrics: TestMetrics, _ label: String, _ dimensions: [(String, String)]) -> Int64 {
        metrics.counters(label: label, dimensions: dimensions).reduce(0) { $0 + $1.totalValue }
    }

    static func timerCount(_ metrics: TestMetrics, _ label: String, _ dimensions: [(String, String)]) -> Int {
        metrics.timers(label: label, dimensions: dimensions).reduce(0) { $0 + $1.values.count }
    }

    @Test("Each committed operation counts once, by policy, with its write's duration", arguments: TestEngine.all)
    func operationsCountOnce(engine: TestEngine) async throws {
        let (fixture, metrics) = try Self.fixture(engine)
        let store = try await fixture.openTicking()
        try await store.start("a", duration: .seconds(60))
        try await store.start("b", duration: .seconds(60), policy: .active)
        try await store.pause("a")
        try await store.resume("a")
        try await store.cancel("b")
        try await store.extend("a", by: .seconds(5))
        try await store.remove("b")
        #expect(Self.total(metrics, "countdown_items_started_total", [("policy", "wall")]) == 1)
        #expect(Self.total(metrics, "countdown_items_started_total", [("policy", "active")]) == 1)
        #expect(Self.total(metrics, "countdown_items_paused_total", [("policy", "wall")]) == 1)
        #expect(Self.total(metrics, "countdown_items_resumed_total", [("policy", "wall")]) == 1)
        #expect(Self.total(metrics, "countdown_items_cancelled_total", [("policy", "active")]) == 1)
        #expect(Self.total(metrics, "countdown_items_extended_total", [("policy", "wall")]) == 1)
        #expect(Self.total(metrics, "countdown_items_removed_total", [("policy", "active")]) == 1)
        for operation in ["start", "pause", "resume", "cancel", "extend", "remove"] {
            let expected = operation == "start" ? 2 : 1
            #expect(Self.timerCount(metrics, "countdown_write_duration_seconds", [("operation", operation)]) == expected, "\(operation)")
        }
        try await store.close()
    }

    @Test("A refused write counts nothing; the expiry it found and recorded counts once, with its lateness", arguments: TestEngine.all)
    func refusalsCountNothing(engine: TestEngine) async throws {
        let (fixture, metrics) = try Self.fixture(engine)
        let store = try await fixture.openTicking()
        try await store.start("order", duration: .seconds(2))
        // Already active: refused inside the transaction, which rolls back.
        await expectError(.alreadyActive) { try await store.start("order", duration: .seconds(9)) }
        #expect(Self.total(metrics, "countdown_items_started_total", [("policy", "wall")]) == 1)
        #expect(Self.timerCount(metrics, "countdown_write_duration_seconds", [("operation", "start")]) == 1)

        // Due 1.5 s ago and not recorded: pausing it records the expiry, then refuses the pause.
        fixture.clock.advance(by: .milliseconds(3500))
        await expectError(.wrongState) { try await store.pause("order") }
        #expect(Self.total(metrics, "countdown_items_paused_total", [("policy", "wall")]) == 0)
        #expect(Self.total(metrics, "countdown_items_expired_total", [("policy", "wall")]) == 1)
        let lateness = metrics.timers(label: "countdown_expiry_lateness_seconds", dimensions: [("policy", "wall")])
        #expect(lateness.flatMap(\.values) == [1_500_000_000])

        // Another write finds nothing new to count.
        try await store.heartbeat()
        #expect(Self.total(metrics, "countdown_items_expired_total", [("policy", "wall")]) == 1)
        try await store.close()
    }

    @Test("The ticker's expiries, the lease and the gauges of items by state and consumer lag", arguments: TestEngine.all)
    func tickerAndGauges(engine: TestEngine) async throws {
        let (fixture, metrics) = try Self.fixture(engine)
        let store = try await fixture.open()
        let consumer = try await store.consumer("billing")
        try await store.start("soon", duration: .seconds(1))
        try await store.start("later", duration: .seconds(600))
        try await store.start("held", duration: .seconds(600))
        try await store.pause("held")
        let ticker = CountdownTicker(store: store)
        let running = Task { try await ticker.run() }
        await ticker.waitUntilIdle()
        try await run(ticker, fixture.clock, for: .seconds(6))
        #expect(Self.total(metrics, "countdown_items_expired_total", [("policy", "wall")]) == 1)
        #expect(try metrics.expectGauge("countdown_lease_held").lastValue == 1)
        // The gauge task runs beside the ticker's loop: wait (bounded) for its pass at 6 s. Its
        // pass at 1 s, the instant "soon" came due, may already show it expired (as every reader
        // does) before the ticker recorded its event: that pass's lag is one event short.
        let lagOfBilling = { try? metrics.expectGauge("countdown_consumer_lag_events", [("consumer", "billing")]).lastValue }
        try await eventually("the gauges are refreshed after the expiry was recorded") {
            fixture.clock.advance(by: .milliseconds(100))
            return (try? metrics.expectGauge("countdown_items", [("state", "expired")]).lastValue) == 1
                && (lagOfBilling() ?? 0) >= 5
        }
        #expect(try metrics.expectGauge("countdown_items", [("state", "running")]).lastValue == 1)
        #expect(try metrics.expectGauge("countdown_items", [("state", "paused")]).lastValue == 1)
        #expect(try metrics.expectGauge("countdown_items", [("state", "cancelled")]).lastValue == 0)
        let lag = try #require(lagOfBilling())
        #expect(lag >= 5, "the consumer has read none of the 3 starts, the pause and the expiry")

        // Deliveries to the consumer's reader, by consumer.
        var events = try await consumer.events().makeAsyncIterator()
        for _ in 0..<3 { _ = try await events.next() }
        #expect(Self.total(metrics, "countdown_consumer_deliveries_total", [("consumer", "billing")]) == 3)

        running.cancel()
        try await running.value
        #expect(try metrics.expectGauge("countdown_lease_held").lastValue == 1, "recorded at each heartbeat while holding")
        try await store.close()
    }

    @Test("Retention counts what each committed batch pruned", arguments: TestEngine.all)
    func retentionCounts(engine: TestEngine) async throws {
        let (fixture, metrics) = try Self.fixture(engine)
        let store = try await fixture.openTicking()
        for index in 0..<5 { try await store.start("k\(index)", duration: .seconds(10)) }
        for index in 0..<2 { try await store.cancel("k\(index)") }
        try await run(store, fixture.clock, for: .seconds(20))
        let pruned = try await store.prune(olderThan: .seconds(5))
        #expect(pruned.items == 5)
        #expect(Self.total(metrics, "countdown_pruned_items_total", []) == 5)
        #expect(Self.total(metrics, "countdown_pruned_events_total", []) == Int64(pruned.events))
        try await store.close()
    }
}

/// Lets `duration` pass while `ticker` runs, a second at a time, waiting for it after each.
private func run(_ ticker: CountdownTicker, _ clock: VirtualClock, for duration: Duration) async throws {
    var left = duration
    while left > .zero {
        let step = min(left, .seconds(1))
        clock.advance(by: step)
        left -= step
        await ticker.waitUntilIdle()
    }
}
