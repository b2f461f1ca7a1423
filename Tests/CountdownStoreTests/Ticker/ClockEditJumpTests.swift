import Foundation
import Testing

@testable import CountdownStoreCore

/// T4 for each size of jump (±1 min, ±1 h, ±24 h, +10 years), while the ticker runs and between
/// two runs in the same boot: no early expiry, no extension, one clock event. On the default
/// fixture's SQLite store; the clock edits of `EngineSuite/ClockEditTests.swift` run on every engine.
@Suite("Clock edits (T4) by jump")
struct ClockEditJumpTests {
    /// ±1 min, ±1 h, ±24 h and +10 years.
    static let jumps: [Int64] = [60, -60, 3600, -3600, 86_400, -86_400, 315_576_000]

    @Test("T4: a clock edit while running: no early expiry, no extension, a clock event", arguments: jumps)
    func clockEditWhileRunning(jumpSeconds: Int64) async throws {
        let fixture = try Fixture()
        let store = try await fixture.open()
        let running = await RunningTicker(store)
        try await store.start("wall", duration: .minutes(2), policy: .wall)
        try await store.start("active", duration: .minutes(2), policy: .active)
        await running.advance(fixture.clock, by: .seconds(30))
        fixture.clock.moveSystemClock(by: .seconds(jumpSeconds))
        await running.advance(fixture.clock, by: .milliseconds(89_999))
        #expect(try await store.countdown("wall")?.remaining == .milliseconds(1), "not early, not extended")
        #expect(try await store.countdown("active")?.remaining == .milliseconds(1))
        await running.advance(fixture.clock, by: .milliseconds(1))
        for key in ["wall", "active"] {
            #expect(try await events(store, key: key, kind: "expired").map(\.lateMs) == [0], "\(key)")
        }
        let edits = try await events(store, kind: "clock_edited")
        #expect(edits.count == 1)
        #expect(edits.first?.detail?.contains("\"skew_ms\":\(jumpSeconds * 1000)") == true, "\(edits.first?.detail ?? "")")
        try await running.stop()
    }

    @Test("T4: a clock edit between two runs in the same boot is detected by the boot clock", arguments: jumps)
    func clockEditBetweenRuns(jumpSeconds: Int64) async throws {
        let fixture = try Fixture()
        do {
            let store = try await fixture.open()
            let running = await RunningTicker(store)
            try await store.start("wall", duration: .minutes(2), policy: .wall)
            try await store.start("active", duration: .minutes(2), policy: .active)
            await running.advance(fixture.clock, by: .seconds(30))
            try await running.stop()
            try await store.close()
        }
        fixture.clock.advance(by: .seconds(10))  // down for ten seconds...
        fixture.clock.moveSystemClock(by: .seconds(jumpSeconds))  // ...while someone sets the clock

        let store = try await fixture.open()
        let running = await RunningTicker(store)
        #expect(try await store.countdown("wall")?.remaining == .seconds(80), "the downtime counted, the edit did not")
        #expect(try await store.countdown("active")?.remaining == .seconds(90))
        let edits = try await events(store, kind: "clock_edited")
        #expect(edits.count == 1)
        #expect(edits.first?.detail?.contains("\"same_boot\":1") == true)
        await running.advance(fixture.clock, by: .milliseconds(79_999))
        #expect(try await store.countdown("wall")?.state == .running)
        await running.advance(fixture.clock, by: .milliseconds(1))
        #expect(try await events(store, key: "wall", kind: "expired").map(\.lateMs) == [0])
        try await running.stop()
    }
}
