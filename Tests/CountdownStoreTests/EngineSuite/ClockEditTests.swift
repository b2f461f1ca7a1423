import Foundation
import Testing

@testable import CountdownStoreCore

/// T4 on every engine: an edit of the system clock neither expires a countdown early nor extends
/// it, and is recorded: across a reboot, set back to 1970, and a clock that slews.
@Suite("Clock edits (T4)")
struct ClockEditTests {
    @Test("T4: across a reboot the wall clock is trusted, but the store clock never goes back", arguments: TestEngine.all)
    func acrossARebootTheWallClockIsTrustedButNeverBackwards(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        try await store.start("wall", duration: .minutes(10))
        try await run(store, fixture.clock, for: .minutes(1))
        let before = try await store.now().wall
        try await store.close()

        // Off for 2 minutes, and the machine comes back with its clock an hour slow.
        fixture.clock.reboot(after: .minutes(2))
        fixture.clock.moveSystemClock(by: .hours(-1))
        let reopened = try await fixture.openTicking()
        #expect(try await reopened.now().wall == before, "W holds rather than going back")
        #expect(try await reopened.countdown("wall")?.remaining == .minutes(9), "no downtime can be proven: none is counted")
        #expect(try await events(reopened, kind: "clock_edited").count == 1)
        try await run(reopened, fixture.clock, for: .seconds(30))
        #expect(try await reopened.now().wall == before + 30_000, "then it moves on with the boot clock")
        #expect(try await reopened.countdown("wall")?.remaining == .minutes(9) - .seconds(30))
    }

    @Test("T4: the system clock set back to 1970 while running, between runs and across a reboot", arguments: TestEngine.all)
    func backTo1970(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        var store = try await fixture.open()
        var running = await RunningTicker(store)
        try await store.start("wall", duration: .minutes(5))
        try await store.start("active", duration: .minutes(5), policy: .active)
        await running.advance(fixture.clock, by: .seconds(30))
        let before = try await store.now().wall
        fixture.clock.setSystemClock(to: Date(timeIntervalSince1970: 0))
        await running.advance(fixture.clock, by: .seconds(30))
        #expect(try await store.now().wall == before + 30_000)
        #expect(try await store.countdown("wall")?.remaining == .minutes(4))
        try await running.stop()
        try await store.close()

        fixture.clock.advance(by: .seconds(60))  // down a minute, clock still near 1970
        store = try await fixture.open()
        running = await RunningTicker(store)
        #expect(try await store.countdown("wall")?.remaining == .minutes(3))
        #expect(try await store.countdown("active")?.remaining == .minutes(4))
        try await running.stop()
        try await store.close()

        fixture.clock.reboot(after: .seconds(60))  // and rebooted with the clock in 1970
        store = try await fixture.open()
        running = await RunningTicker(store)
        let wall = try await store.now().wall
        #expect(wall >= before + 90_000, "W never goes back, even across a reboot into 1970")
        if engine == .sqlite {
            #expect(try await store.countdown("wall")?.remaining == .minutes(3), "no downtime can be proven, none counted")
        } else {
            // The database's clock, less the skew the holder recorded against its boot clock,
            // proves the downtime: a host's reboot does not lose it.
            #expect(try await store.countdown("wall")?.remaining == .minutes(2))
        }
        #expect(try await events(store, kind: "clock_edited").count >= 2)
        await running.advance(fixture.clock, by: .seconds(180))
        #expect(try await events(store, key: "wall", kind: "expired").map(\.lateMs) == [0])
        try await running.stop()
    }

    @Test("T4: a slewing system clock moves nothing; each second of accumulated drift is recorded", arguments: TestEngine.all)
    func slewingClock(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let running = await RunningTicker(store)
        try await store.start("wall", duration: .minutes(2))
        for _ in 0..<60 {
            await running.advance(fixture.clock, by: .seconds(1))
            fixture.clock.moveSystemClock(by: .milliseconds(100))  // the clock runs 10 % fast
        }
        #expect(try await store.countdown("wall")?.remaining == .minutes(1))
        let edits = try await events(store, kind: "clock_edited")
        #expect(edits.count == 5, "6 s of drift, recorded at each second beyond the tolerance: \(edits.count)")
        try await running.stop()
    }

    @Test(
        "T1: a clock stepped back while no host counted never places now before what a write stored",
        arguments: TestEngine.all)
    func clockSteppedBackWhileNobodyCounted(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        var store = try await fixture.openTicking()
        try await store.close()
        // A host that holds no lease writes well after the last checkpoint (on a server engine
        // such a write leaves the checkpoint where it is), then closes.
        fixture.clock.advance(by: .seconds(30))
        store = try await fixture.open()
        let started = try await store.start("wall", duration: .minutes(2))
        try await store.close()
        // The clock is stepped back an hour, and a host opens a second later.
        fixture.clock.moveSystemClock(by: .seconds(-3600))
        fixture.clock.advance(by: .seconds(1))
        store = try await fixture.open()
        let seen = try #require(try await store.countdown("wall"))
        #expect(seen.remaining! <= .minutes(2), "remaining never grows")
        // On PostgreSQL writers leave the checkpoint behind: while nobody holds the lease, a host
        // counts from the last write's instant at least.
        #expect(try await store.now().wall >= started.startedAt.millisecondsSince1970, "W never before the write")
        fixture.clock.advance(by: .seconds(10))
        let later = try #require(try await store.countdown("wall"))
        #expect(later.remaining! < seen.remaining!, "time counts from where the write left it: \(later.remaining!)")
        try await store.close()
    }
}
