import Foundation
import MetricsTestKit
import Testing

@testable import CountdownStoreCore

/// What the host's metrics options decide, on an SQLite store: the dimensions stay bounded (never
/// a key; a group only when the host opts in), and with no backend bootstrapped nothing is reported.
/// What each engine counts is in `EngineSuite/MetricsTests.swift`.
@Suite("Metrics configuration")
struct MetricsConfigurationTests {
    @Test("Dimensions are bounded: never a key; a group only when the host opts in")
    func dimensionsAreBounded() async throws {
        for groups in [false, true] {
            let (fixture, metrics) = try MetricsTests.fixture(.sqlite, groups: groups)
            let store = try await fixture.openTicking()
            try await store.start("order-1042", duration: .seconds(1), group: "payments")
            fixture.clock.advance(by: .seconds(2))
            try await store.heartbeat()
            let allowed: Set<String> = ["policy", "operation", "state", "consumer", "group"]
            for counter in metrics.counters {
                for (name, value) in counter.dimensions {
                    #expect(allowed.contains(name), "\(counter.label) has the dimension \(name)")
                    #expect(value != "order-1042", "\(counter.label) names a key")
                    #expect(name != "group" || groups, "\(counter.label) has a group though the host did not opt in")
                }
            }
            let started = metrics.counters(label: "countdown_items_started_total")
            #expect(started.count == 1)
            #expect(started.first?.dimensions.contains { $0 == ("group", "payments") } == groups)
            try await store.close()
        }
    }

    @Test("With no backend bootstrapped, nothing is reported")
    func noBackendNoWork() async throws {
        let store = try await Fixture().openTicking()
        #expect(!store.metrics.enabled)
        try await store.start("a", duration: .seconds(5))
        try await store.close()
    }
}
