import CountdownStore
import Foundation
import GRDB
import Testing

// The code of the article "The time model" (CountdownStore.docc/TimeModel.md), compiled here so
// it cannot drift from the API, and run on virtual time. After each step of the article's code,
// the test checks the figures the article states (its diagram and tables included).

@Suite("Article: The time model")
struct TimeModelArticleTests {
    /// The store's A and G, in whole seconds.
    private static func clocks(_ store: CountdownStore) async throws -> [Int64] {
        let now = try await store.now()
        return [now.active / 1000, now.gap / 1000]
    }

    /// The remaining time of `key`.
    private static func remaining(_ store: CountdownStore, _ key: String) async throws -> Duration? {
        try await store.countdown(key)?.remaining
    }

    // About 660 passes of the ticker one after another (a virtual second each): alone it takes a
    // quarter of a second, but in a full run on two cores, beside the CPU-bound suites, every pass
    // waits its turn for a thread, and the whole took more than a minute. The articles' tests are
    // bounded at five minutes for that reason: the bound is for a hang, not for their speed.
    @Test(
        "The worked example: a wall and an active countdown across a run, a suspend, a downtime and a restart",
        .timeLimit(.minutes(5)))
    func workedExample() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path()

        let clock = VirtualClock()
        let store = try CountdownStore(path: path, configuration: .init(clock: clock))
        let ticker = CountdownTicker(store: store)
        let running = Task { try await ticker.run() }
        await ticker.waitUntilIdle()

        /// Lets `duration` of real time pass on the virtual clock while `ticker` runs: one second
        /// at a time, so that its heartbeat keeps its lease live, as it would on a real clock.
        func pass(_ duration: Duration, _ ticker: CountdownTicker) async {
            var left = duration
            while left > .zero {
                let step = min(left, .seconds(1))
                clock.advance(by: step)
                left -= step
                await ticker.waitUntilIdle()
            }
        }

        await pass(.seconds(120), ticker)   // the host runs for 2 minutes,
        try await store.enterBackground()           // goes to the background for 1 minute,
        await pass(.seconds(60), ticker)
        try await store.enterForeground()            // and comes back.

        let checkout = try await store.start("checkout", duration: .seconds(600))  // wall, the default
        let screen = try await store.start("screen-time", duration: .seconds(600), policy: .active)
        print(checkout.computedAt)  // StoreTime(wall: …, active: 120000, gap: 60000)

        #expect(checkout.computedAt.active == 120_000 && checkout.computedAt.gap == 60_000)
        #expect(screen.computedAt == checkout.computedAt)
        #expect(checkout.remaining == .seconds(600) && screen.remaining == .seconds(600))

        await pass(.seconds(180), ticker)   // t = 3:00: both ran 3 minutes
        try await store.enterBackground()           // the app goes to the background
        await pass(.seconds(120), ticker)   // t = 5:00
        try await store.enterForeground()            // back in the foreground
        await pass(.seconds(60), ticker)    // t = 6:00

        #expect(try await Self.clocks(store) == [360, 180])
        #expect(try await Self.remaining(store, "checkout") == .seconds(240))
        #expect(try await Self.remaining(store, "screen-time") == .seconds(360))

        running.cancel()
        try await running.value             // the ticker writes a final heartbeat and frees the lease
        try await store.close()
        clock.advance(by: .seconds(180))    // t = 9:00: the process is down for 3 minutes

        let reopened = try CountdownStore(path: path, configuration: .init(clock: clock))
        print(try await reopened.countdown("checkout")?.remaining ?? .zero)     // 60.0 seconds
        print(try await reopened.countdown("screen-time")?.remaining ?? .zero)  // 360.0 seconds

        #expect(try await Self.clocks(reopened) == [360, 360])
        #expect(try await Self.remaining(reopened, "checkout") == .seconds(60))
        #expect(try await Self.remaining(reopened, "screen-time") == .seconds(360))

        let expiries = try await reopened.events(.expiries)
        let nextTicker = CountdownTicker(store: reopened)
        let nextRun = Task { try await nextTicker.run() }
        await nextTicker.waitUntilIdle()
        await pass(.seconds(120), nextTicker)  // t = 11:00

        var iterator = expiries.makeAsyncIterator()
        let expiry = try await iterator.next()
        print(expiry?.key ?? "", expiry?.late ?? .zero)  // checkout 0.0 seconds: at t = 10:00, on time

        #expect(expiry?.key == "checkout" && expiry?.late == .zero)
        #expect(try await reopened.countdown("checkout")?.state == .expired)
        #expect(try await Self.clocks(reopened) == [480, 360])
        #expect(try await Self.remaining(reopened, "screen-time") == .seconds(240))
        // The screen-time countdown is due at A = 12:00: 4 more minutes of foreground time.
        await pass(.seconds(239), nextTicker)
        #expect(try await reopened.countdown("screen-time")?.state == .running)
        await pass(.seconds(1), nextTicker)
        #expect(try await reopened.countdown("screen-time")?.state == .expired)
        nextRun.cancel()
        try await nextRun.value
        try await reopened.close()
    }

    @Test("The diagram: every column of A, G, A + G and both items' remaining time")
    func diagram() async throws {
        /// One column of the diagram, in seconds.
        struct Column: Equatable {
            var active: Int64
            var gap: Int64
            var wallRemaining: Int64
            var activeRemaining: Int64
        }
        func column(_ store: CountdownStore) async throws -> Column {
            let now = try await store.now()
            return Column(
                active: now.active / 1000, gap: now.gap / 1000,
                wallRemaining: try #require(try await store.countdown("checkout")?.remaining).components.seconds,
                activeRemaining: try #require(try await store.countdown("screen-time")?.remaining).components.seconds)
        }
        let fixture = try Fixture()
        let store = try await fixture.openTicking()
        try await run(store, fixture.clock, for: .seconds(120))
        try await store.enterBackground()
        try await run(store, fixture.clock, for: .seconds(60))
        try await store.enterForeground()
        try await store.start("checkout", duration: .seconds(600))
        try await store.start("screen-time", duration: .seconds(600), policy: .active)
        var columns = [try await column(store)]                              // t = 0:00
        try await run(store, fixture.clock, for: .seconds(180))
        columns.append(try await column(store))                              // t = 3:00
        try await store.enterBackground()
        try await run(store, fixture.clock, for: .seconds(120))
        columns.append(try await column(store))                              // t = 5:00
        try await store.enterForeground()
        try await run(store, fixture.clock, for: .seconds(60))
        columns.append(try await column(store))                              // t = 6:00
        try await store.close()
        fixture.clock.advance(by: .seconds(180))
        let reopened = try await fixture.openTicking()
        columns.append(try await column(reopened))                           // t = 9:00
        try await run(reopened, fixture.clock, for: .seconds(60))
        columns.append(try await column(reopened))                           // t = 10:00
        #expect(try await events(reopened, kind: "expired").map(\.key) == ["checkout"], "the heartbeat at 10:00 recorded it")
        try await run(reopened, fixture.clock, for: .seconds(60))
        let t11 = try await reopened.now()                                   // t = 11:00
        #expect(columns == [
            Column(active: 120, gap: 60, wallRemaining: 600, activeRemaining: 600),
            Column(active: 300, gap: 60, wallRemaining: 420, activeRemaining: 420),
            Column(active: 300, gap: 180, wallRemaining: 300, activeRemaining: 420),
            Column(active: 360, gap: 180, wallRemaining: 240, activeRemaining: 360),
            Column(active: 360, gap: 360, wallRemaining: 60, activeRemaining: 360),
            Column(active: 420, gap: 360, wallRemaining: 0, activeRemaining: 300),
        ])
        #expect(t11.active == 480_000 && t11.gap == 360_000)
        #expect(try await reopened.countdown("screen-time")?.remaining == .seconds(240))
        #expect(try await reopened.countdown("checkout")?.state == .expired)
    }

    @Test("The elapsed formulas, on the stored figures of each item")
    func formulas() async throws {
        let fixture = try Fixture()
        let store = try await fixture.openTicking()
        try await run(store, fixture.clock, for: .seconds(30))
        try await store.enterBackground()
        try await run(store, fixture.clock, for: .seconds(20))
        try await store.enterForeground()
        try await store.start("w", duration: .seconds(600))
        try await store.start("a", duration: .seconds(600), policy: .active)
        try await run(store, fixture.clock, for: .seconds(40))
        try await store.enterBackground()
        try await run(store, fixture.clock, for: .seconds(50))
        try await store.enterForeground()
        try await store.pause("w")
        try await store.pause("a")
        try await run(store, fixture.clock, for: .seconds(7))
        try await store.resume("w")
        try await store.resume("a")
        try await run(store, fixture.clock, for: .seconds(3))

        let now = try await store.now()
        let rows = try await TimeModelArticleFigures.read(store)
        let wall = try #require(rows["w"])
        let active = try #require(rows["a"])
        #expect(wall.startOffset == 30_000 && wall.gapAtStart == 20_000)
        #expect(wall.paused == 7_000 && active.paused == 7_000)
        let wallElapsed = (now.active - wall.startOffset) + (now.gap - wall.gapAtStart) - wall.paused
        let activeElapsed = now.active - active.startOffset - active.paused
        #expect(try await store.countdown("w")?.elapsed == .milliseconds(wallElapsed))
        #expect(try await store.countdown("a")?.elapsed == .milliseconds(activeElapsed))
        #expect(wallElapsed == 93_000 && activeElapsed == 43_000)
    }

    @Test("Pause: paused time never counts, in the foreground, the background or while down", .timeLimit(.minutes(5)))
    func pauseExample() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path()

        let clock = VirtualClock()
        let store = try CountdownStore(path: path, configuration: .init(clock: clock))
        let ticker = CountdownTicker(store: store)
        let running = Task { try await ticker.run() }
        await ticker.waitUntilIdle()
        let pass = timePasser(clock)  // the article's `pass(_:_:)`

        try await store.start("cooldown", duration: .seconds(300))    // wall
        try await store.start("level-timer", duration: .seconds(300), policy: .active)
        await pass(.seconds(60), ticker)

        try await store.pause("cooldown")
        try await store.pause("level-timer")
        await pass(.seconds(60), ticker)                   // paused in the foreground
        try await store.enterBackground()
        await pass(.seconds(60), ticker)                   // paused in the background
        running.cancel()
        try await running.value
        try await store.close()
        clock.advance(by: .seconds(3600))                  // paused while nothing runs

        let reopened = try CountdownStore(path: path, configuration: .init(clock: clock))
        let cooldown = try await reopened.resume("cooldown")
        let levelTimer = try await reopened.resume("level-timer")
        print(cooldown.remaining ?? .zero, levelTimer.remaining ?? .zero)  // 240.0 seconds 240.0 seconds

        #expect(cooldown.remaining == .seconds(240))
        #expect(levelTimer.remaining == .seconds(240))
        // The pause is kept on each item's own timeline: A + G for the wall item, A for the active one.
        let figures = try await TimeModelArticleFigures.read(reopened)
        #expect(figures["cooldown"]?.paused == 3_720_000, "60 s + 60 s + 3600 s on A + G")
        #expect(figures["level-timer"]?.paused == 60_000, "only the foreground minute passed on A")
        try await reopened.close()
    }

    @Test("A crash: an active countdown counts the time until the dead holder's lease runs out, a wall countdown all of it")
    func crash() async throws {
        let fixture = try Fixture()
        var store: CountdownStore? = try await fixture.openTicking()
        try await store!.start("w", duration: .seconds(600))
        try await store!.start("a", duration: .seconds(600), policy: .active)
        try await run(store!, fixture.clock, for: .seconds(60))
        fixture.clock.advance(by: .milliseconds(700))  // killed 700 ms after the last heartbeat
        store = nil
        fixture.clock.advance(by: .seconds(60))
        let reopened = try await fixture.open()
        #expect(try await reopened.countdown("a")?.elapsed == .seconds(62), "active until the lease ran out, 2 s after the last heartbeat")
        #expect(try await reopened.countdown("w")?.elapsed == .seconds(120) + .milliseconds(700))
    }

    @Test("A host frozen longer than the lease: the time after its lease ran out is background gap")
    func frozenHost() async throws {
        let fixture = try Fixture()
        let store = try await fixture.openTicking()
        try await store.start("a", duration: .seconds(600), policy: .active)
        try await run(store, fixture.clock, for: .seconds(10))
        fixture.clock.advance(by: .seconds(30))  // no heartbeat for 30 s: a frozen process, a sleeping machine
        try await store.heartbeat()
        #expect(try await store.countdown("a")?.elapsed == .seconds(12), "the 2 s of the lease count")
        #expect(try await store.now().gap == 28_000)
        fixture.clock.advance(by: .milliseconds(1500))  // within the lease: active
        try await store.heartbeat()
        #expect(try await store.countdown("a")?.elapsed == .seconds(13) + .milliseconds(500))
    }

    @Test("Without a ticker: A stands still, wall items count, a due item is expired at once and its event waits for the next write")
    func withoutATicker() async throws {
        let fixture = try Fixture()
        let store = try await fixture.open()
        try await store.start("w", duration: .seconds(60))
        try await store.start("a", duration: .seconds(60), policy: .active)
        fixture.clock.advance(by: .seconds(90))
        let w = try #require(try await store.countdown("w"))
        #expect(w.state == .expired && w.remaining == .zero && w.expiredAt == w.startedAt.addingTimeInterval(60))
        #expect(try await store.countdown("a")?.elapsed == .zero)
        #expect(try await store.expireDue().map(\.key) == ["w"])
    }

    @Test("Clock edits: nothing moves, a clock event is recorded, the skew is visible", .timeLimit(.minutes(5)))
    func clockEditExample() async throws {
        let folder = try TemporaryFolder()
        let clock = VirtualClock()
        let store = try CountdownStore(path: folder.path(), configuration: .init(clock: clock))
        let ticker = CountdownTicker(store: store)
        let running = Task { try await ticker.run() }
        await ticker.waitUntilIdle()
        let pass = timePasser(clock)  // the article's `pass(_:_:)`

        try await store.start("otp", duration: .seconds(60))
        clock.moveSystemClock(by: .seconds(3600))  // someone sets the system clock an hour ahead
        await pass(.seconds(10), ticker)

        let otp = try await store.countdown("otp")
        print(otp?.remaining ?? .zero)                 // 50.0 seconds: neither expired nor shortened
        let edit = try await store.recentEvents(kinds: [.clockEdited]).first
        print(edit?.detail ?? "")                      // {"previous_skew_ms":0,"same_boot":1,"skew_ms":3600000,…}
        print(try await store.clockStatus().clockSkew) // 3600.0 seconds

        #expect(otp?.remaining == .seconds(50))
        #expect(edit?.detail?.contains(#""previous_skew_ms":0,"same_boot":1,"skew_ms":3600000,"#) == true, "\(edit?.detail ?? "")")
        #expect(try await store.clockStatus().clockSkew == .seconds(3600))
        #expect(try await store.recentEvents(kinds: [.clockEdited]).count == 1, "recorded once, not at every heartbeat")
        await pass(.seconds(49), ticker)
        #expect(try await store.countdown("otp")?.state == .running)
        await pass(.seconds(1), ticker)
        #expect(try await store.countdown("otp")?.state == .expired)
        running.cancel()
        try await running.value
    }

    @Test("Clock edits between two runs in the same boot are measured by the boot clock")
    func clockEditBetweenRuns() async throws {
        let fixture = try Fixture()
        let store = try await fixture.openTicking()
        try await store.start("w", duration: .seconds(600))
        try await run(store, fixture.clock, for: .seconds(60))
        try await store.close()
        fixture.clock.advance(by: .seconds(120))
        fixture.clock.moveSystemClock(by: .hours(-5))
        let reopened = try await fixture.open()
        try await reopened.heartbeat()  // a write: the first one after the edit records it
        #expect(try await reopened.countdown("w")?.remaining == .seconds(420), "the 2 minutes down count, the edit does not")
        #expect(try await reopened.recentEvents(kinds: [.clockEdited]).count == 1)
    }

    @Test("Across a reboot: downtime by the wall clock; a clock behind gives none and W holds; a clock ahead counts")
    func acrossAReboot() async throws {
        // A clock that is right.
        do {
            let fixture = try Fixture()
            let store = try await fixture.openTicking()
            try await store.start("w", duration: .seconds(600))
            try await store.start("a", duration: .seconds(600), policy: .active)
            try await store.close()
            fixture.clock.reboot(after: .seconds(120))
            let reopened = try await fixture.open()
            #expect(try await reopened.countdown("w")?.remaining == .seconds(480))
            #expect(try await reopened.countdown("a")?.remaining == .seconds(600))
        }
        // A clock that comes back behind the last checkpoint.
        do {
            let fixture = try Fixture()
            let store = try await fixture.openTicking()
            try await store.start("w", duration: .seconds(600))
            let before = try await store.now().wall
            try await store.close()
            fixture.clock.reboot(after: .seconds(120))
            fixture.clock.moveSystemClock(by: .hours(-1))
            let reopened = try await fixture.open()
            try await reopened.heartbeat()
            #expect(try await reopened.now().wall == before)
            #expect(try await reopened.countdown("w")?.remaining == .seconds(600))
            #expect(try await reopened.recentEvents(kinds: [.clockEdited]).count == 1)
        }
        // A clock that comes back ahead: taken as downtime.
        do {
            let fixture = try Fixture()
            let store = try await fixture.openTicking()
            try await store.start("w", duration: .seconds(6000))
            try await store.close()
            fixture.clock.reboot(after: .seconds(120))
            fixture.clock.moveSystemClock(by: .hours(1))
            let reopened = try await fixture.open()
            try await reopened.heartbeat()
            #expect(try await reopened.countdown("w")?.remaining == .seconds(6000 - 120 - 3600))
            #expect(try await reopened.recentEvents(kinds: [.clockEdited]).isEmpty)
        }
    }

    @Test("Calibration moves W only; start(endingAt:) reads its deadline on W")
    func calibrationExample() async throws {
        let folder = try TemporaryFolder()
        let clock = VirtualClock(start: Date(timeIntervalSince1970: 1_795_000_000))
        let store = try CountdownStore(path: folder.path(), configuration: .init(clock: clock))
        try await store.heartbeat()

        try await store.start("sale", duration: .seconds(600))
        let serverTime = Date(timeIntervalSince1970: 1_795_000_300)  // 5 minutes ahead of this machine
        let calibrated = try await store.calibrate(serverTime: serverTime)
        print(calibrated.wall)                                      // 1795000300000

        let sale = try await store.countdown("sale")
        print(sale?.remaining ?? .zero)                             // 600.0 seconds: durations do not move
        let flash = try await store.start("flash", endingAt: serverTime.addingTimeInterval(900))
        print(flash.duration ?? .zero)                              // 900.0 seconds, on the server's clock

        let earlier = Date(timeIntervalSince1970: 1_795_000_000)    // behind W: refused unless forced
        let slewing = try await store.calibrate(serverTime: earlier, force: true)
        print(slewing.wall)                                         // 1795000300000: W never goes back
        // 10 s later W reads 1795000305000: half speed until the server time catches up

        #expect(calibrated.wall == 1_795_000_300_000)
        #expect(sale?.remaining == .seconds(600))
        #expect(flash.duration == .seconds(900))
        #expect(try await store.clockStatus().calibrationOffset == .zero, "the server agrees with this machine again")
        #expect(slewing.wall == 1_795_000_300_000)
        try await run(store, clock, for: .seconds(10))
        #expect(try await store.now().wall == 1_795_000_305_000)
        // Still behind W: refused without force, and nothing changes.
        await expectError(.calibrationNeedsForce) { try await store.calibrate(serverTime: earlier) }
        #expect(try await store.now().wall == 1_795_000_305_000)
        #expect(try await store.countdown("sale")?.remaining == .seconds(590), "durations still count")
    }
}

/// The stored start offset, gap at start and total paused time of each item, by key.
private struct TimeModelArticleFigures: Sendable {
    var startOffset: Int64
    var gapAtStart: Int64
    var paused: Int64

    static func read(_ store: CountdownStore) async throws -> [String: TimeModelArticleFigures] {
        try await store.grdb.read { db in
            var figures: [String: TimeModelArticleFigures] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT key, start_offset_ms, gap_at_start_ms, paused_ms FROM countdowns") {
                figures[row["key"]] = TimeModelArticleFigures(
                    startOffset: row["start_offset_ms"], gapAtStart: row["gap_at_start_ms"], paused: row["paused_ms"])
            }
            return figures
        }
    }
}
