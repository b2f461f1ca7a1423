import Foundation
import Testing

@testable import CountdownStoreCore

/// The required behaviours of SPEC section 3, at the store level on virtual time, on every engine.
@Suite("Time model")
struct TimeModelTests {
    // MARK: T1

    @Test("T1: remaining time never increases, whatever the system clock does", arguments: TestEngine.all)
    func t1RemainingNeverIncreasesWhateverTheSystemClockDoes(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let clock = fixture.clock
        var store = try await fixture.openTicking()
        try await store.start("wall", duration: .hours(30), policy: .wall)
        try await store.start("active", duration: .hours(30), policy: .active)
        var last = ["wall": Duration.hours(30), "active": Duration.hours(30)]

        let edits: [Duration] = [.minutes(1), .minutes(-1), .hours(1), .hours(-1), .hours(24), .hours(-24), .seconds(-3_000_000_000)]
        for (step, edit) in edits.enumerated() {
            try await run(store, clock, for: .seconds(3))
            clock.moveSystemClock(by: edit)
            if step.isMultiple(of: 2) {
                // And across a restart in the same boot.
                try await store.close()
                clock.advance(by: .seconds(2))
                store = try await fixture.openTicking()
            }
            try await run(store, clock, for: .seconds(2))
            for key in ["wall", "active"] {
                let remaining = try #require(try await store.countdown(key)?.remaining)
                #expect(remaining <= last[key]!, "\(key) went from \(last[key]!) to \(remaining) after \(edit)")
                last[key] = remaining
            }
        }
        // Nothing jumped: the wall countdown lost exactly the real time that passed.
        let wall = try #require(try await store.countdown("wall"))
        #expect(wall.remaining == .hours(30) - .seconds(7 * 5 + 4 * 2))
        let clockEvents = try await events(store, kind: "clock_edited")
        #expect(clockEvents.count >= edits.count, "every edit is recorded as a clock event")
    }

    @Test("T1: an edit of the system clock while running moves nothing and is recorded", arguments: TestEngine.all)
    func t1ClockEditWhileRunningMovesNothingAndIsRecorded(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        try await store.start("otp", duration: .seconds(60))
        let wallBefore = try await store.now().wall
        fixture.clock.moveSystemClock(by: .hours(1))
        try await run(store, fixture.clock, for: .seconds(10))
        #expect(try await store.countdown("otp")?.remaining == .seconds(50))
        #expect(try await store.now().wall == wallBefore + 10_000, "W follows the boot clock, not the edited reading")
        let recorded = try await events(store, kind: "clock_edited")
        #expect(recorded.count == 1)
        #expect(recorded.first?.detail?.contains("\"skew_ms\":3600000") == true)
    }

    // MARK: T2

    @Test("T2: a wall countdown counts the time the process was down, same boot", arguments: TestEngine.all)
    func t2WallCountsDowntimeInTheSameBoot(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        try await store.start("pay", duration: .minutes(15), policy: .wall)
        try await run(store, fixture.clock, for: .minutes(2))
        try await store.close()

        fixture.clock.advance(by: .minutes(5))  // the process is down
        let reopened = try await fixture.open()
        #expect(try await reopened.countdown("pay")?.remaining == .minutes(8))
    }

    @Test("T2: a wall countdown counts downtime across a reboot and a crash", arguments: TestEngine.all)
    func t2WallCountsDowntimeAcrossARebootAndACrash(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        var store: CountdownStore? = try await fixture.openTicking()
        try await store!.start("pay", duration: .minutes(15), policy: .wall)
        try await run(store!, fixture.clock, for: .seconds(30))
        fixture.clock.advance(by: .milliseconds(700))  // crash 700 ms after the last heartbeat
        store = nil

        fixture.clock.reboot(after: .minutes(3))
        let reopened = try await fixture.openTicking()
        let remaining = try #require(try await reopened.countdown("pay")?.remaining)
        #expect(remaining == .minutes(15) - .seconds(30) - .milliseconds(700) - .minutes(3))
    }

    // MARK: T3

    @Test("T3: an active countdown loses nothing over a graceful stop and downtime", arguments: TestEngine.all)
    func t3ActiveLosesNothingOverAGracefulStop(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        try await store.start("screen", duration: .minutes(10), policy: .active)
        try await run(store, fixture.clock, for: .seconds(90) + .milliseconds(400))
        try await store.close()

        fixture.clock.advance(by: .hours(2))
        let reopened = try await fixture.openTicking()
        #expect(try await reopened.countdown("screen")?.elapsed == .seconds(90) + .milliseconds(400))
        try await run(reopened, fixture.clock, for: .seconds(10))
        #expect(try await reopened.countdown("screen")?.elapsed == .seconds(100) + .milliseconds(400))
    }

    @Test("T3: an active countdown does not count a suspend; a wall one does", arguments: TestEngine.all)
    func t3ActiveDoesNotCountASuspend(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        try await store.start("screen", duration: .minutes(10), policy: .active)
        try await store.start("pay", duration: .minutes(10), policy: .wall)
        try await run(store, fixture.clock, for: .seconds(20))
        try await store.enterBackground()
        try await run(store, fixture.clock, for: .minutes(5))
        fixture.clock.advance(by: .minutes(30))  // the app was frozen: no heartbeats at all
        try await store.enterForeground()
        try await run(store, fixture.clock, for: .seconds(5))

        #expect(try await store.countdown("screen")?.elapsed == .seconds(25))
        #expect(try await store.countdown("pay")?.remaining == .zero)
        let status = try await store.clockStatus()
        #expect(status.now.gap == (Duration.minutes(35)).milliseconds)
    }

    @Test("T3: after a crash an active countdown counts the downtime only until the dead holder's lease runs out", arguments: TestEngine.all)
    func t3ActiveCountsAtMostTheLeaseAfterACrash(engine: TestEngine) async throws {
        let lease = CountdownStore.Configuration().leaseDuration
        for killedAfter in [Duration.milliseconds(1), .milliseconds(999)] {  // just after a heartbeat, just before the next
            let fixture = try Fixture(engine: engine)
            var store: CountdownStore? = try await fixture.openTicking()
            try await store!.start("screen", duration: .minutes(10), policy: .active)
            try await run(store!, fixture.clock, for: .seconds(60))
            fixture.clock.advance(by: killedAfter)  // SIGKILL
            store = nil

            fixture.clock.advance(by: .hours(1))
            let reopened = try await fixture.openTicking()
            let elapsed = try #require(try await reopened.countdown("screen")?.elapsed)
            // Every reader saw the active timeline advance while the lease was live: it stands
            // still where the lease ran out, and the next holder starts from there.
            #expect(elapsed == .seconds(60) + lease, "killed \(killedAfter) after the last heartbeat")
            #expect(elapsed - (.seconds(60) + killedAfter) <= lease, "off by at most the lease")
            try await run(reopened, fixture.clock, for: .seconds(5))
            #expect(try await reopened.countdown("screen")?.elapsed == .seconds(65) + lease)
        }
    }

    @Test("T1 across a crash: while a dead holder's lease runs out, no reader sees an active countdown's remaining time go back", arguments: TestEngine.all)
    func t1ActiveNeverGoesBackWhenTheHolderDies(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        var holder: CountdownStore? = try await fixture.openTicking()
        let started = try await holder!.now().wall
        try await holder!.start("screen", duration: .minutes(10), policy: .active)
        try await holder!.start("short", duration: .seconds(61) + .milliseconds(500), policy: .active)
        try await run(holder!, fixture.clock, for: .seconds(60))  // the last heartbeat: the lease runs to 62 s
        let reader = try await fixture.open()  // another process, which never holds the lease
        fixture.clock.advance(by: .milliseconds(300))
        holder = nil  // killed 300 ms after its last heartbeat

        var lastRemaining = Duration.minutes(10)
        var shortExpired = false
        for step in 1...40 {  // 4 s in steps of 100 ms, across the lease's end
            fixture.clock.advance(by: .milliseconds(100))
            // Each read by a process of its own, as `countdown show` would: no floor of an earlier reading.
            let fresh = try await fixture.open()
            let screen = try #require(try await fresh.countdown("screen"))
            let short = try #require(try await fresh.countdown("short"))
            try await fresh.close()
            let remaining = try #require(screen.remaining)
            #expect(remaining <= lastRemaining, "step \(step): the remaining time went from \(lastRemaining) to \(remaining)")
            lastRemaining = remaining
            if shortExpired {
                #expect(short.state == .expired, "step \(step): reached zero, then read \(short.state)")
            }
            if short.state == .expired {
                shortExpired = true
                #expect(short.expiredAt == Date(millisecondsSince1970: started + 61_500), "the instant it reached zero")
            }
        }
        #expect(shortExpired, "it reached zero 1.5 s after the last heartbeat, within the lease")
        #expect(try await reader.countdown("screen")?.elapsed == .seconds(62), "A stands still where the lease ran out")
        #expect(try await reader.now().gap == 2_300, "the rest is background gap")

        // The next holder starts where every reader saw A stand, and records the expiry at that instant.
        try await reader.heartbeat()
        #expect(try await reader.countdown("screen")?.elapsed == .seconds(62))
        try await run(reader, fixture.clock, for: .seconds(3))
        #expect(try await reader.countdown("screen")?.elapsed == .seconds(65))
        let recorded = try await events(reader, kind: "expired")
        #expect(recorded.count == 1)
        #expect(recorded.first?.deadlineAtMs == started + 61_500)
        try await reader.close()
    }

    @Test("T3: without a lease holder, active time stands still and the gap grows", arguments: TestEngine.all)
    func t3WithoutALeaseHolderActiveTimeStandsStill(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()  // no heartbeat: nobody ticks
        try await store.start("screen", duration: .minutes(10), policy: .active)
        fixture.clock.advance(by: .minutes(3))
        #expect(try await store.countdown("screen")?.elapsed == .zero)
        try await store.heartbeat()
        try await run(store, fixture.clock, for: .seconds(4))
        #expect(try await store.countdown("screen")?.elapsed == .seconds(4))
    }

    // MARK: T5

    @Test("T5: after calibration the wall clock follows the server, persisted", arguments: TestEngine.all)
    func t5WallClockFollowsTheServerTime(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        try await store.start("sale", duration: .minutes(10))
        let server = Date(millisecondsSince1970: fixture.clock.systemMilliseconds + 300_000)
        try await store.calibrate(serverTime: server)
        #expect(try await store.now().wall == server.millisecondsSince1970)
        #expect(try await store.countdown("sale")?.remaining == .minutes(10), "durations do not move")

        try await run(store, fixture.clock, for: .seconds(10))
        #expect(try await store.now().wall == server.millisecondsSince1970 + 10_000)
        try await store.close()

        fixture.clock.reboot(after: .seconds(20))
        let reopened = try await fixture.open()
        #expect(try await reopened.now().wall == server.millisecondsSince1970 + 30_000)
        let status = try await reopened.clockStatus()
        #expect(status.calibrationOffset == .seconds(300))
        #expect(try await reopened.countdown("sale")?.remaining == .minutes(10) - .seconds(30))
    }

    @Test("T5: a calibration to an earlier time is refused unless forced; forced, W slews at half speed until it catches up", arguments: TestEngine.all)
    func t5BackwardCalibrationSlewsTheWallClock(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        try await store.start("active", duration: .minutes(10), policy: .active)
        let before = try await store.now().wall
        let earlier = Date(millisecondsSince1970: fixture.clock.systemMilliseconds - 5000)
        let untouched = try await snapshot(store)
        let refusal = await expectError(.calibrationNeedsForce) { try await store.calibrate(serverTime: earlier) }
        #expect(refusal?.message.contains("5s behind the store clock") == true)
        #expect(refusal?.message.contains("half speed for 10s") == true)
        #expect(try await snapshot(store) == untouched, "a refusal writes nothing")

        try await store.calibrate(serverTime: earlier, force: true)
        #expect(try await store.now().wall == before)
        try await run(store, fixture.clock, for: .seconds(3))
        #expect(try await store.now().wall == before + 1500, "half speed: distinct instants, never back")
        try await run(store, fixture.clock, for: .seconds(7))
        #expect(try await store.now().wall == before + 5000, "caught up with the trusted time after twice the difference")
        try await run(store, fixture.clock, for: .seconds(2))
        #expect(try await store.now().wall == before + 7000, "then full speed")
        #expect(try await store.countdown("active")?.elapsed == .seconds(12), "the lease survived the calibration")
        #expect(try await store.clockStatus().calibrationOffset == .seconds(-5))

        // Across a restart, the slew goes on from the stored checkpoint.
        try await store.calibrate(serverTime: Date(millisecondsSince1970: fixture.clock.systemMilliseconds - 7000), force: true)
        try await store.close()
        fixture.clock.advance(by: .seconds(2))
        let reopened = try await fixture.open()
        #expect(try await reopened.now().wall == before + 8000)
    }

    @Test("T5: a server time within the clock-edit tolerance behind W needs no force; more than a day ahead does", arguments: TestEngine.all)
    func t5CalibrationBounds(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        let wall = try await store.now().wall
        try await store.calibrate(serverTime: Date(millisecondsSince1970: wall - 800))
        #expect(try await store.now().wall == wall)
        let far = Date(millisecondsSince1970: wall + 10 * 365 * 86_400_000)
        let refusal = await expectError(.calibrationNeedsForce) { try await store.calibrate(serverTime: far) }
        #expect(refusal?.message.contains("ahead of the store clock") == true)
        try await store.calibrate(serverTime: Date(millisecondsSince1970: wall + 86_400_000))  // exactly a day: allowed
        #expect(try await store.now().wall == wall + 86_400_000)
        let forced = try await store.calibrate(serverTime: far, force: true)
        #expect(forced.wall == far.millisecondsSince1970)
    }

    // MARK: T6

    @Test("T6: paused time never counts, over many cycles and across a restart", arguments: TestEngine.all)
    func t6PausedTimeNeverCounts(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        var store = try await fixture.openTicking()
        try await store.start("wall", duration: .minutes(30), policy: .wall)
        try await store.start("active", duration: .minutes(30), policy: .active)
        try await store.startStopwatch("watch", policy: .wall)
        var counted: Duration = .zero
        for cycle in 0..<20 {
            try await run(store, fixture.clock, for: .seconds(Int64(cycle % 3 + 1)))
            counted += .seconds(Int64(cycle % 3 + 1))
            for key in ["wall", "active", "watch"] { try await store.pause(key) }
            try await run(store, fixture.clock, for: .seconds(7))
            for key in ["wall", "active", "watch"] { try await store.resume(key) }
        }
        // A pause across a restart and a reboot.
        for key in ["wall", "active", "watch"] { try await store.pause(key) }
        try await store.close()
        fixture.clock.reboot(after: .hours(3))
        store = try await fixture.openTicking()
        try await run(store, fixture.clock, for: .seconds(5))
        for key in ["wall", "active", "watch"] {
            let item = try #require(try await store.countdown(key))
            #expect(item.state == .paused)
            #expect(item.elapsed == counted, "\(key)")
            try await store.resume(key)
        }
        try await run(store, fixture.clock, for: .seconds(2))
        for key in ["wall", "active", "watch"] {
            #expect(try await store.countdown(key)?.elapsed == counted + .seconds(2), "\(key)")
        }
    }

    // MARK: T7

    @Test("T7: after restart, extend and shorten no expiry of an older generation is recorded", arguments: TestEngine.all)
    func t7NoExpiryOfAnOlderGeneration(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        try await store.start("a", duration: .seconds(10))
        try await store.start("b", duration: .seconds(10))
        try await store.start("c", duration: .seconds(10))
        try await run(store, fixture.clock, for: .seconds(5))
        #expect(try await store.extend("a", by: .seconds(20)).generation == 2)
        #expect(try await store.restart("b").generation == 2)
        #expect(try await store.shorten("c", by: .seconds(2)).generation == 2)

        try await run(store, fixture.clock, for: .seconds(6))  // past the first deadlines; each heartbeat records what is due
        #expect(try await events(store, kind: "expired").map(\.key) == ["c"], "c was shortened to 8 s; a and b have moved on")
        try await run(store, fixture.clock, for: .seconds(20))
        #expect(try await events(store, kind: "expired").map(\.key) == ["c", "b", "a"], "b came due at 15 s, a at 30 s")

        for key in ["a", "b", "c"] {
            let expiries = try await events(store, key: key, kind: "expired")
            #expect(expiries.count == 1, "\(key) expired once")
            #expect(expiries.first?.generation == 2, "\(key) expired in its newest generation")
        }
    }

    @Test("T7: replacing an active key bumps the generation", arguments: TestEngine.all)
    func t7ReplacingBumpsTheGeneration(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        try await store.start("otp", duration: .seconds(30))
        let replaced = try await store.start("otp", duration: .seconds(30), whenActive: .replace)
        #expect(replaced.generation == 2)
        try await run(store, fixture.clock, for: .seconds(31))
        try await store.expireDue()
        let expiries = try await events(store, key: "otp", kind: "expired")
        #expect(expiries.map(\.generation) == [2])
    }

    // MARK: Expiry

    @Test("Expiry is never early and records its real lateness", arguments: TestEngine.all)
    func expiryIsNeverEarlyAndRecordsItsLateness(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        try await store.start("a", duration: .milliseconds(1500))
        fixture.clock.advance(by: .milliseconds(1499))
        #expect(try await store.expireDue().isEmpty)
        fixture.clock.advance(by: .milliseconds(1))
        #expect(try await store.expireDue().map(\.key) == ["a"])

        try await store.start("b", duration: .seconds(1))
        try await store.close()
        fixture.clock.advance(by: .seconds(61))  // nothing ran while it came due
        let reopened = try await fixture.open()
        #expect(try await reopened.expireDue().map(\.key) == ["b"])
        let event = try #require(try await events(reopened, key: "b", kind: "expired").first)
        #expect(event.lateMs == 60_000)
        #expect(event.firedAtMs! - event.deadlineAtMs! == 60_000)
    }
}
