import Foundation
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

@Suite("Operations")
struct OperationsTests {
    @Test("Starting an active key is refused unless replace or keep is asked", arguments: TestEngine.all)
    func startingAnActiveKey(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.start("otp", duration: .seconds(30), payload: .text("first"))
        await expectError(.alreadyActive) { try await store.start("otp", duration: .seconds(60)) }
        let kept = try await store.start("otp", duration: .seconds(60), whenActive: .keep)
        #expect(kept.duration == .seconds(30) && kept.payload == .text("first") && kept.generation == 1)
        let replaced = try await store.start("otp", duration: .seconds(60), payload: .text("second"), whenActive: .replace)
        #expect(replaced.duration == .seconds(60) && replaced.payload == .text("second") && replaced.generation == 2)
        #expect(try await events(store, key: "otp").map(\.kind) == ["started", "replaced"])
    }

    @Test("An ended key can be started again without replace, in a new generation", arguments: TestEngine.all)
    func endedKeyStartsAgain(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.start("otp", duration: .seconds(30))
        try await store.cancel("otp")
        let again = try await store.start("otp", duration: .seconds(30))
        #expect(again.state == .running && again.generation == 2)
    }

    @Test("A removed key's generations never repeat when it is created again", arguments: TestEngine.all)
    func removedKeysNeverReuseGenerations(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.start("otp", duration: .seconds(30))
        try await store.restart("otp")
        try await store.remove("otp")
        #expect(try await store.start("otp", duration: .seconds(30)).generation == 3)
        try await store.remove("otp")
        #expect(try await store.startStopwatch("otp").generation == 4)
    }

    @Test("A countdown past its deadline is expired for every reader; a refused write still records its expiry", arguments: TestEngine.all)
    func dueCountdownIsExpiredAndARefusalRecordsIt(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()  // no ticker
        let started = try await store.start("otp", duration: .seconds(10))
        fixture.clock.advance(by: .seconds(12))
        let due = try #require(try await store.countdown("otp"))
        let reachedZero = started.startedAt.addingTimeInterval(10)
        #expect(due.state == .expired && due.remaining == .zero && due.elapsed == .seconds(10))
        #expect(due.expiredAt == reachedZero && due.deadlineAt == reachedZero)
        #expect(try await events(store, key: "otp", kind: "expired").isEmpty, "nothing has recorded it yet")

        fixture.clock.advance(by: .seconds(3))
        #expect(try await store.countdown("otp")?.expiredAt == reachedZero, "the instant does not move")
        await expectError(.wrongState) { try await store.pause("otp") }
        let expiry = try #require(try await events(store, key: "otp", kind: "expired").first, "the refusal kept the expiry")
        #expect(expiry.generation == 1 && expiry.lateMs == 5000)
        #expect(expiry.deadlineAtMs == started.startedAt.millisecondsSince1970 + 10_000)
        #expect(expiry.firedAtMs == started.startedAt.millisecondsSince1970 + 15_000)
        let recorded = try #require(try await store.countdown("otp"))
        #expect(recorded.state == .expired && recorded.expiredAt == reachedZero)
        #expect(try await events(store, key: "otp", kind: "paused").isEmpty, "the refused pause wrote nothing of its own")

        let again = try await store.start("otp", duration: .seconds(10))  // not active any more: no replace needed
        #expect(again.generation == 2)
        #expect(try await events(store, key: "otp", kind: "expired").count == 1)
    }

    @Test("Pause, resume, cancel, restart and remove move the state and record events", arguments: TestEngine.all)
    func lifecycle(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        try await store.start("a", duration: .minutes(1), group: "g", payload: .bytes(Data([1, 2, 3])))
        try await run(store, fixture.clock, for: .seconds(10))
        #expect(try await store.pause("a").state == .paused)
        await expectError(.wrongState) { try await store.pause("a") }
        try await run(store, fixture.clock, for: .seconds(10))
        #expect(try await store.resume("a").remaining == .seconds(50))
        let cancelled = try await store.cancel("a")
        #expect(cancelled.state == .cancelled && cancelled.elapsed == .seconds(10) && cancelled.deadlineAt == nil)
        await expectError(.wrongState) { try await store.cancel("a") }
        await expectError(.wrongState) { try await store.extend("a", by: .seconds(1)) }
        let restarted = try await store.restart("a")
        #expect(restarted.state == .running && restarted.elapsed == .zero && restarted.generation == 2)
        #expect(restarted.group == "g" && restarted.payload == .bytes(Data([1, 2, 3])))
        let removed = try await store.remove("a")
        #expect(removed.key == "a")
        #expect(try await store.countdown("a") == nil)
        await expectError(.notFound) { try await store.remove("a") }
        #expect(
            try await events(store, key: "a").map(\.kind)
                == ["started", "paused", "resumed", "cancelled", "restarted", "removed"])
    }

    @Test("Extend and shorten move the deadline; shortening past zero expires at once", arguments: TestEngine.all)
    func extendAndShorten(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        try await store.start("a", duration: .minutes(1))
        try await run(store, fixture.clock, for: .seconds(20))
        let extended = try await store.extend("a", by: .seconds(30))
        #expect(extended.remaining == .seconds(70) && extended.duration == .seconds(90))
        let shortened = try await store.shorten("a", by: .seconds(60))
        #expect(shortened.remaining == .seconds(10) && shortened.generation == 3)
        let over = try await store.shorten("a", by: .minutes(5))
        #expect(over.state == .expired && over.remaining == .zero && over.elapsed == .seconds(20))
        let expiry = try #require(try await events(store, key: "a", kind: "expired").first)
        #expect(expiry.lateMs == 0 && expiry.generation == 4)
        await expectError(.wrongState) { try await store.extend("a", by: .seconds(1)) }

        try await store.startStopwatch("w")
        await expectError(.wrongState) { try await store.extend("w", by: .seconds(1)) }
    }

    @Test("A paused countdown can be extended and shortened", arguments: TestEngine.all)
    func pausedCountdownChangesDuration(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        try await store.start("a", duration: .minutes(1))
        try await run(store, fixture.clock, for: .seconds(15))
        try await store.pause("a")
        #expect(try await store.extend("a", by: .seconds(5)).remaining == .seconds(50))
        #expect(try await store.shorten("a", by: .seconds(20)).remaining == .seconds(30))
        try await run(store, fixture.clock, for: .seconds(100))
        #expect(try await store.resume("a").remaining == .seconds(30))
    }

    @Test("A countdown can end at an instant of the calibrated wall clock", arguments: TestEngine.all)
    func startEndingAtAnInstant(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let server = Date(millisecondsSince1970: fixture.clock.systemMilliseconds + 60_000)
        try await store.calibrate(serverTime: server)
        let item = try await store.start("sale", endingAt: server.addingTimeInterval(15 * 60))
        #expect(item.remaining == .minutes(15))
        #expect(item.deadlineAt == server.addingTimeInterval(15 * 60))
    }

    @Test("Bulk start writes every item in one transaction, and keep ignores duplicates", arguments: TestEngine.all)
    func bulkStart(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let requests: [CountdownRequest] = (0..<1000).map {
            $0.isMultiple(of: 10) ? .stopwatch("k\($0)") : .countdown("k\($0)", duration: .seconds(Int64($0) + 1), group: "bulk")
        }
        let started = try await store.start(requests)
        #expect(started.count == 1000)
        #expect(try await store.counts().count(.running) == 1000)
        let again = try await store.start(requests, whenActive: .keep)
        #expect(again.allSatisfy { $0.generation == 1 })
        #expect(try await events(store).count == 1000, "keep writes no event")
        let replaced = try await store.start(Array(requests.prefix(3)), whenActive: .replace)
        #expect(replaced.map(\.generation) == [2, 2, 2] && replaced.map(\.key) == ["k0", "k1", "k2"])
        await expectError(.alreadyActive) { try await store.start(Array(requests.suffix(2) + requests.prefix(1))) }
        #expect(try await store.countdown("k0")?.generation == 2)
        #expect(try await events(store).count == 1003, "a refused batch changes nothing")
        // Text that needs escaping on its way (a batch travels to PostgreSQL as JSON), and bytes.
        let oddKey = "q\"uo\\te 🎉 ü"
        let oddText = "line\n\t\"x\"\\ \u{1} é"
        let odd = try await store.start([
            .countdown(oddKey, duration: .seconds(5), group: "g\"r\\", policy: .active, payload: .text(oddText)),
            .stopwatch("bytes", payload: .bytes(Data([0, 1, 34, 92, 255]))),
        ])
        #expect(odd[0].key == oddKey && odd[0].group == "g\"r\\" && odd[0].policy == .active)
        #expect(odd[0].payload == .text(oddText) && odd[1].payload == .bytes(Data([0, 1, 34, 92, 255])))
        #expect(try await store.countdown(oddKey) == odd[0])
        #expect(try await store.countdown("bytes")?.payload == .bytes(Data([0, 1, 34, 92, 255])))
        // A batch of several statements (PostgreSQL sends 5,000 to one, two at once): every
        // outcome in the order asked, an active key in a later statement kept or refused.
        let many = (0..<12_001).map { CountdownRequest.countdown("m\($0)", duration: .hours(1), group: "many") }
        try await store.start("m11000", duration: .hours(2))
        let kept = try await store.start(many, whenActive: .keep)
        #expect(kept.map(\.key) == many.map(\.key), "in the order asked")
        #expect(kept[11_000].durationMs == 7_200_000 && kept[11_001].durationMs == 3_600_000, "the active one kept")
        await expectError(.alreadyActive) {
            try await store.start((0..<6_000).map { .countdown("n\($0)", duration: .hours(1)) } + [many[11_000]])
        }
        #expect(try await store.countdown("n0") == nil, "a refused batch changes nothing")
    }

    @Test("Prune removes old ended items and acknowledged old events only", arguments: TestEngine.all)
    func prune(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        try await store.start("old", duration: .seconds(1))
        try await store.start("cancelled", duration: .minutes(1))
        try await store.cancel("cancelled")
        try await store.start("running", duration: .hours(100))
        try await run(store, fixture.clock, for: .seconds(2))
        try await store.expireDue()
        try await run(store, fixture.clock, for: .hours(2), step: .minutes(1))
        try await store.start("recent", duration: .seconds(1))
        try await run(store, fixture.clock, for: .seconds(2))
        try await store.expireDue()

        let result = try await store.prune(olderThan: .hours(1))
        #expect(result.items == 2)
        #expect(try await store.countdown("old") == nil)
        #expect(try await store.countdown("recent")?.state == .expired)
        #expect(try await store.countdown("running")?.state == .running)
        #expect(result.events == 5)
    }

    @Test("A key started again after prune deleted its item goes on from its last generation", arguments: TestEngine.all)
    func pruneKeepsGenerations(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        try await store.start("otp", duration: .seconds(1))
        try await store.restart("otp")  // generation 2
        try await run(store, fixture.clock, for: .seconds(2))
        #expect(try await events(store, key: "otp", kind: "expired").map(\.generation) == [2], "the heartbeat recorded it")
        try await run(store, fixture.clock, for: .hours(2), step: .minutes(1))
        #expect(try await store.prune(olderThan: .hours(1)).items == 1)
        #expect(try await store.countdown("otp") == nil)
        // Its expiry of generation 2 may still wait for a consumer: the new life must not be 2.
        #expect(try await store.start("otp", duration: .seconds(30)).generation == 3)
    }
}

@Suite("Closing")
struct ClosingTests {
    @Test("A closed store refuses every operation with a clear error instead of touching a closed database", arguments: TestEngine.all)
    func closedStoreRefusesOperations(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.start("otp", duration: .seconds(30))
        try await store.close()
        let refused = await #expect(throws: CountdownError.self) { try await store.countdown("otp") }
        #expect(refused?.code == .wrongState && refused?.message == "the store is closed")
        await expectError(.wrongState) { try await store.start("other", duration: .seconds(1)) }
        let reopened = try await fixture.open()
        #expect(try await reopened.countdown("otp")?.state == .running)
        #expect(try await reopened.countdown("other") == nil, "the refused start wrote nothing")
        try await reopened.close()
    }
}
