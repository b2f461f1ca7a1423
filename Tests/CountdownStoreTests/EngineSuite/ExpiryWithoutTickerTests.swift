import Foundation
import GRDB
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

/// A countdown is expired from the instant its remaining time reaches zero, for every reader,
/// whether or not a ticker has recorded it: time passing with no ticker, with a ticker that is
/// suspended or stopped, and across a restart, on virtual time.
@Suite("Expiry without a ticker")
struct ExpiryWithoutTickerTests {
    /// Every query of the store agrees that `key` is expired at `instant` and not active.
    private func expectExpiredEverywhere(
        _ store: CountdownStore, _ key: String, at instant: Date, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let item = try #require(try await store.countdown(key), sourceLocation: sourceLocation)
        #expect(item.state == .expired && item.remaining == .zero && item.elapsed == item.duration, sourceLocation: sourceLocation)
        #expect(item.expiredAt == instant && item.deadlineAt == instant, sourceLocation: sourceLocation)
        #expect(try await store.list(.expired).contains { $0.key == key && $0.expiredAt == instant }, sourceLocation: sourceLocation)
        #expect(try await store.expired().contains { $0.key == key }, sourceLocation: sourceLocation)
        #expect(try await store.expired(since: instant).contains { $0.key == key }, sourceLocation: sourceLocation)
        #expect(try await !store.expired(since: instant.addingTimeInterval(0.001)).contains { $0.key == key }, sourceLocation: sourceLocation)
        #expect(try await !store.active().items.contains { $0.key == key }, sourceLocation: sourceLocation)
        #expect(try await !store.list(.running).contains { $0.key == key }, sourceLocation: sourceLocation)
        #expect(try await !store.expiring(within: .seconds(3600)).contains { $0.key == key }, sourceLocation: sourceLocation)
        #expect(try await store.nextDeadline()?.key != key, sourceLocation: sourceLocation)
        #expect(try await store.list(.all).first { $0.key == key }?.state == .expired, sourceLocation: sourceLocation)
    }

    @Test("With no ticker, a countdown past its deadline is expired everywhere, at a fixed instant; its event waits for the next write", arguments: TestEngine.all)
    func noTicker(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let soon = try await store.start("soon", duration: .milliseconds(300), group: "g")
        try await store.start("later", duration: .seconds(60), group: "g")
        fixture.clock.advance(by: .seconds(1))
        let reachedZero = soon.startedAt.addingTimeInterval(0.3)
        try await expectExpiredEverywhere(store, "soon", at: reachedZero)
        let counts = try await store.counts()
        #expect(counts.count(.expired) == 1 && counts.count(.running) == 1 && counts.count(.expired, group: "g") == 1)
        #expect(try await store.nextDeadline()?.key == "later")
        #expect(try await events(store, kind: "expired").isEmpty)

        fixture.clock.advance(by: .seconds(5))
        try await expectExpiredEverywhere(store, "soon", at: reachedZero)  // the instant does not move

        // Any write records it, with its real lateness; the instant stays.
        try await store.start("other", duration: .seconds(60))
        let recorded = try await events(store, kind: "expired")
        #expect(recorded.map(\.key) == ["soon"])
        #expect(recorded.first?.lateMs == 5700)
        #expect(recorded.first?.deadlineAtMs == reachedZero.millisecondsSince1970)
        #expect(recorded.first?.firedAtMs == soon.startedAt.millisecondsSince1970 + 6000)
        try await expectExpiredEverywhere(store, "soon", at: reachedZero)
        try await store.start("another", duration: .seconds(60))
        #expect(try await events(store, kind: "expired").count == 1, "recorded once")
    }

    @Test("An active countdown does not run out while nobody ticks, and has no deadline on the wall clock meanwhile", arguments: TestEngine.all)
    func activeWithoutTicker(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.start("screen", duration: .seconds(2), policy: .active)
        fixture.clock.advance(by: .minutes(5))
        let idle = try #require(try await store.countdown("screen"))
        #expect(idle.state == .running && idle.remaining == .seconds(2) && idle.deadlineAt == nil)

        try await store.heartbeat()  // a ticker takes the lease: now it counts, and has a deadline
        let held = try #require(try await store.countdown("screen"))
        let now = try await store.now()
        #expect(held.deadlineAt == Date(millisecondsSince1970: now.wall + 2000))
        try await run(store, fixture.clock, for: .seconds(1))
        fixture.clock.advance(by: .milliseconds(999))
        #expect(try await store.countdown("screen")?.state == .running)
        fixture.clock.advance(by: .milliseconds(1))  // the lease (2 s) is still live: A counts
        let due = try #require(try await store.countdown("screen"))
        #expect(due.state == .expired && due.expiredAt == held.deadlineAt)
    }

    @Test("With a suspended ticker, wall countdowns run out for every reader and active ones stand still", arguments: TestEngine.all)
    func suspendedTicker(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        let wall = try await store.start("pay", duration: .seconds(3))
        try await store.start("screen", duration: .seconds(3), policy: .active)
        try await store.enterBackground()
        try await run(store, fixture.clock, for: .seconds(5))  // heartbeats go on; the host is suspended
        try await expectExpiredEverywhere(store, "pay", at: wall.startedAt.addingTimeInterval(3))
        let screen = try #require(try await store.countdown("screen"))
        #expect(screen.state == .running && screen.remaining == .seconds(3) && screen.deadlineAt == nil)
        // The heartbeats were writes: the expiry is recorded, once, at its instant.
        let recorded = try await events(store, kind: "expired")
        #expect(recorded.map(\.key) == ["pay"] && recorded.first?.deadlineAtMs == wall.startedAt.millisecondsSince1970 + 3000)
    }

    @Test("A ticker that stopped (frozen or killed) leaves readers in other processes seeing the expiry at once", arguments: TestEngine.all)
    func stoppedTickerOtherReader(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let holder = try await fixture.openTicking()
        let pay = try await holder.start("pay", duration: .seconds(2))
        try await run(holder, fixture.clock, for: .seconds(1))
        fixture.clock.advance(by: .seconds(10))  // the holder is frozen: no heartbeat, no expiry recorded
        let reader = try await fixture.open()
        try await expectExpiredEverywhere(reader, "pay", at: pay.startedAt.addingTimeInterval(2))
        #expect(try await events(reader, kind: "expired").isEmpty)
        // The holder comes back: its next write records the expiry at the same instant.
        try await holder.heartbeat()
        #expect(try await events(reader, kind: "expired").first?.deadlineAtMs == pay.startedAt.millisecondsSince1970 + 2000)
        try await expectExpiredEverywhere(reader, "pay", at: pay.startedAt.addingTimeInterval(2))
    }

    @Test("A named consumer's claims leave due expiries to a live lease holder, and record them when nobody holds the lease", arguments: TestEngine.all)
    func claimsLeaveExpiriesToHolder(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let holder = try await fixture.open()
        let reader = try await fixture.open()
        _ = try await reader.consumer("mailer")
        let pay = try await holder.start("pay", duration: .milliseconds(500))
        try await holder.heartbeat()  // a live lease, as a running ticker holds it
        fixture.clock.advance(by: .seconds(1))
        // The claim delivers what the holder records: it records nothing itself.
        let before = try await reader.claimEvents(consumer: "mailer", claimant: "r:1", filter: .expiries, probing: false)
        #expect(before?.isEmpty ?? true)
        #expect(try await events(reader, kind: "expired").isEmpty)
        try await expectExpiredEverywhere(reader, "pay", at: pay.startedAt.addingTimeInterval(0.5))
        try await holder.heartbeat()
        let recorded = try #require(try await reader.claimEvents(consumer: "mailer", claimant: "r:1", filter: .expiries))
        #expect(recorded.map(\.key) == ["pay"] && recorded.first?.deadlineAt == pay.startedAt.addingTimeInterval(0.5))

        // Once the lease has run out, nobody records them but the writes: the claim does.
        let ship = try await holder.start("ship", duration: .milliseconds(500))
        fixture.clock.advance(by: .seconds(5))
        var claimed = try await reader.claimEvents(consumer: "mailer", claimant: "r:1", filter: .expiries, probing: false) ?? []
        #expect(try await events(reader, kind: "expired").map(\.key) == ["pay", "ship"])
        if claimed.isEmpty {
            // PostgreSQL inserts a write's events at its end, after the claim read them: the next claim has it.
            claimed = try await reader.claimEvents(consumer: "mailer", claimant: "r:1", filter: .expiries) ?? []
        }
        #expect(claimed.map(\.key) == ["ship"] && claimed.first?.deadlineAt == ship.startedAt.addingTimeInterval(0.5))
    }

    @Test("Across a restart: a wall countdown that ran out while the process was down is expired at the instant it reached zero", arguments: TestEngine.all)
    func acrossARestart(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        let pay = try await store.start("pay", duration: .seconds(5))
        try await store.start("screen", duration: .seconds(5), policy: .active)
        try await run(store, fixture.clock, for: .seconds(3))
        try await store.close()
        fixture.clock.advance(by: .minutes(10))  // down

        let reopened = try await fixture.open()  // opening writes nothing
        try await expectExpiredEverywhere(reopened, "pay", at: pay.startedAt.addingTimeInterval(5))
        let screen = try #require(try await reopened.countdown("screen"))
        #expect(screen.state == .running && screen.remaining == .seconds(2), "active time stood still while down")
        fixture.clock.reboot(after: .minutes(1))
        let afterReboot = try await fixture.open()
        try await expectExpiredEverywhere(afterReboot, "pay", at: pay.startedAt.addingTimeInterval(5))
        try await afterReboot.heartbeat()
        let recorded = try await events(afterReboot, kind: "expired")
        #expect(recorded.map(\.key) == ["pay"] && recorded.first?.lateMs == 3 * 1000 + 11 * 60_000 - 5000)
    }

    @Test("A refused write keeps the expiry it found; shortening past zero expires at once, at that instant", arguments: TestEngine.all)
    func refusalsKeepExpiries(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let soon = try await store.start("soon", duration: .milliseconds(300))
        fixture.clock.advance(by: .seconds(1))
        await expectError(.wrongState) { try await store.pause("soon") }
        await expectError(.wrongState) { try await store.resume("soon") }
        await expectError(.wrongState) { try await store.cancel("soon") }
        await expectError(.wrongState) { try await store.extend("soon", by: .seconds(1)) }
        let recorded = try await events(store, kind: "expired")
        #expect(recorded.count == 1 && recorded.first?.deadlineAtMs == soon.startedAt.millisecondsSince1970 + 300)
        // A refusal on another key commits the expiry too, and nothing of its own.
        try await store.start("second", duration: .milliseconds(100))
        fixture.clock.advance(by: .seconds(1))
        await expectError(.notFound) { try await store.pause("missing") }
        #expect(try await events(store, kind: "expired").map(\.key) == ["soon", "second"])

        let long = try await store.start("long", duration: .seconds(60))
        fixture.clock.advance(by: .seconds(10))
        let shortened = try await store.shorten("long", by: .seconds(55))
        #expect(shortened.state == .expired && shortened.expiredAt == long.startedAt.addingTimeInterval(10))
    }

    @Test("Listing every page with a small limit gives what one large page gives, in every filter", arguments: TestEngine.all)
    func pagesWalkEverything(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        for index in 0..<7 { try await store.start("run-\(index)", duration: .seconds(Int64(100 + index * 7 % 5)), group: index.isMultiple(of: 2) ? "g" : nil) }
        for index in 0..<4 { try await store.start("due-\(index)", duration: .seconds(Int64(min(3, 1 + index))), policy: index == 3 ? .active : .wall) }
        try await store.start("paused", duration: .seconds(50))
        try await store.pause("paused")
        try await store.startStopwatch("watch-a")
        try await store.startStopwatch("watch-b")
        try await store.pause("watch-b")
        try await store.start("gone", duration: .seconds(30))
        try await store.cancel("gone")
        try await run(store, fixture.clock, for: .seconds(2))  // due-0 and due-1 recorded by heartbeats
        fixture.clock.advance(by: .milliseconds(1500))         // due-2 and due-3 due, unrecorded (lease live)
        #expect(try await events(store, kind: "expired").count == 2)

        for filter in StateFilter.allCases {
            for group in [nil, "g"] as [String?] {
                let whole = try await store.list(filter, group: group, limit: 1000)
                for limit in [1, 2, 3] {
                    var walked: [Countdown] = []
                    var cursor: ListCursor?
                    repeat {
                        let page = try await store.list(filter, group: group, limit: limit, after: cursor)
                        #expect(page.items.count <= limit)
                        walked += page.items
                        cursor = page.next
                    } while cursor != nil
                    #expect(walked.map(\.key) == whole.map(\.key), "\(filter) \(group ?? "-") by \(limit)")
                }
            }
        }
        let expired = try await store.list(.expired).map(\.key)
        #expect(expired == ["due-3", "due-2", "due-1", "due-0"], "newest first, recorded or not")
        #expect(try await store.list(.all).map(\.key).suffix(5) == ["due-3", "due-2", "due-1", "due-0", "gone"])
        let first = try await store.list(.expired, limit: 1, after: nil)
        let mismatch = await expectError(.invalidArgument) { try await store.list(.active, limit: 1, after: first.next) }
        #expect(mismatch?.message.contains("expired") == true)
        await expectError(.invalidArgument) { try await store.list(.expired, group: "g", limit: 1, after: first.next) }
    }

    @Test("A cursor survives JSON, for a host that hands it to a client", arguments: TestEngine.all)
    func cursorIsCodable(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        for index in 0..<3 { try await store.start("k\(index)", duration: .seconds(Int64(10 + index))) }
        let page = try await store.list(.active, limit: 2, after: nil)
        let data = try JSONEncoder().encode(try #require(page.next))
        let cursor = try JSONDecoder().decode(ListCursor.self, from: data)
        #expect(try await store.list(.active, limit: 2, after: cursor).items.map(\.key) == ["k2"])
    }
}
