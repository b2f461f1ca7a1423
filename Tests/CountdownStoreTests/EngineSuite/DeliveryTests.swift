import Foundation
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

@Suite("Event delivery", .timeLimit(.minutes(5)))
struct DeliveryTests {
    /// Takes the next `count` events of `events`.
    private func take(_ count: Int, from events: CountdownEvents) async throws -> [CountdownEvent] {
        var taken: [CountdownEvent] = []
        for try await event in events {
            taken.append(event)
            if taken.count == count { break }
        }
        return taken
    }

    @Test("A named consumer gets every event in order, across restarts, until it acknowledges", arguments: TestEngine.all)
    func namedConsumerResumesFromItsCursor(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        do {
            let store = try await fixture.open()
            let running = await RunningTicker(store)
            for (index, key) in ["a", "b", "c", "d"].enumerated() {
                try await store.start(key, duration: .seconds(Int64(index) + 1), payload: .text("p-\(key)"))
            }
            await running.advance(fixture.clock, by: .seconds(5))
            let mailer = try await store.consumer("mailer")
            let first = try await take(2, from: try await mailer.events(.expiries))
            #expect(first.map(\.key) == ["a", "b"])
            #expect(first.map(\.payload) == [.text("p-a"), .text("p-b")])
            try await mailer.acknowledge(first[0])  // b is handled but its acknowledgement is lost in a crash
            try await running.stop()
        }
        let store = try await fixture.open()
        let mailer = try await store.consumer("mailer")
        let events = try await mailer.events(.expiries)
        let reader = Task { try await take(3, from: events) }
        // The first reader ended its loop, so its claim was released; had its process died, the
        // claim would have run out by now.
        fixture.clock.advance(by: fixture.configuration.claimTimeout)
        let again = try await reader.value
        #expect(again.map(\.key) == ["b", "c", "d"], "b once more (unacknowledged), then the rest, in order")
        try await mailer.acknowledge(again[2])
        #expect(try await mailer.acknowledgedThrough() == again[2].id)
        try await mailer.acknowledge(again[0])
        #expect(try await mailer.acknowledgedThrough() == again[2].id, "the cursor never moves back")
    }

    @Test("A consumer sees new events as they happen, filtered by group and key", arguments: TestEngine.all)
    func consumerFollowsNewEventsByGroup(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let running = await RunningTicker(store)
        let billing = try await store.consumer("billing", startingAt: .now)
        let stream = try await billing.events(EventFilter(kinds: [.expired], group: "payments"))
        let reader = Task { try await take(2, from: stream) }
        try await store.start("order-1", duration: .seconds(2), group: "payments")
        try await store.start("otp", duration: .seconds(1), group: "codes")
        try await store.start("order-2", duration: .seconds(3), group: "payments")
        await running.advance(fixture.clock, by: .seconds(4))
        let received = try await reader.value
        #expect(received.map(\.key) == ["order-1", "order-2"])
        #expect(received.allSatisfy { $0.kind == .expired && $0.late == .zero })
        try await running.stop()
    }

    @Test("Anonymous subscribers get live events only", arguments: TestEngine.all)
    func anonymousSubscribersGetLiveEventsOnly(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.start("before", duration: .seconds(1))
        let live = try await store.events()
        let reader = Task { try await take(2, from: live) }
        try await store.start("after", duration: .seconds(1))
        try await store.pause("after")
        let received = try await reader.value
        #expect(received.map(\.kind) == [.started, .paused])
        #expect(received.allSatisfy { $0.key == "after" })
    }

    @Test("T7: an expiry superseded by a newer generation is never delivered", arguments: TestEngine.all)
    func supersededExpiryIsNotDelivered(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let running = await RunningTicker(store)
        try await store.start("otp", duration: .seconds(1))
        try await store.start("other", duration: .seconds(1))
        await running.advance(fixture.clock, by: .seconds(2))
        try await store.restart("otp")  // before any consumer read the expiry of generation 1
        await running.advance(fixture.clock, by: .seconds(2))
        let consumer = try await store.consumer("late-reader")
        let expiries = try await take(2, from: try await consumer.events(.expiries))
        #expect(expiries.map(\.key) == ["other", "otp"])
        #expect(expiries.map(\.generation) == [1, 2])
        let recorded = try await events(store, key: "otp", kind: "expired")
        #expect(recorded.map(\.generation) == [1, 2], "generation 1 did expire; it is only not delivered")
        try await running.stop()
    }

    @Test("T7: a superseded expiry stays undelivered after its key is removed and created again", arguments: TestEngine.all)
    func supersededExpiryStaysSupersededAcrossRemoval(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let running = await RunningTicker(store)
        try await store.start("otp", duration: .seconds(1))
        await running.advance(fixture.clock, by: .seconds(2))  // generation 1 expires
        try await store.restart("otp")  // generation 2 supersedes it
        try await store.remove("otp")
        try await store.start("otp", duration: .seconds(1))  // generation 3
        await running.advance(fixture.clock, by: .seconds(2))
        let consumer = try await store.consumer("late-reader")
        var iterator = try await consumer.events(.expiries).makeAsyncIterator()
        let expiry = try #require(try await iterator.next())
        #expect(expiry.generation == 3, "generation 1 was superseded before its key was removed")
        try await running.stop()
    }

    @Test("Readers of one consumer share its events: each goes to one reader, and a stopped reader's unacknowledged ones to another at once", arguments: TestEngine.all)
    func readersShareAConsumer(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let hostA = try await fixture.open()
        let hostB = try await fixture.open()  // another instance on the same database: another host
        for index in 1...6 { try await hostA.start("first-\(index)", duration: .seconds(Int64(index))) }
        try await run(hostA, fixture.clock, for: .seconds(7))

        let mailerA = try await hostA.consumer("mailer")
        var readerA = try await mailerA.events(.expiries).makeAsyncIterator()
        var handledByA: [String] = []
        for _ in 1...2 {
            let event = try #require(try await readerA.next())
            handledByA.append(event.key ?? "")
            try await mailerA.acknowledge(event)
        }
        #expect(handledByA == ["first-1", "first-2"])

        // A second reader, while A holds its claim on the first six: it gets only new events.
        for index in 1...3 { try await hostB.start("second-\(index)", duration: .seconds(Int64(index))) }
        try await run(hostB, fixture.clock, for: .seconds(4))
        let mailerB = try await hostB.consumer("mailer")
        let readerB = try await mailerB.events(.expiries)
        let second = try await take(3, from: readerB)
        #expect(second.map(\.key) == ["second-1", "second-2", "second-3"])
        for event in second { try await mailerB.acknowledge(event) }
        #expect(try await mailerB.acknowledgedThrough() < second[2].id, "A's claim is not acknowledged in full")

        // A stops reading (its task is cancelled): B gets A's four unacknowledged events at once.
        let stopped = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await readerA.next()
        }
        #expect(try await stopped.value == nil)
        let rest = try await take(4, from: readerB)
        #expect(rest.map(\.key) == ["first-3", "first-4", "first-5", "first-6"])
        for event in rest { try await mailerB.acknowledge(event) }
        #expect(try await mailerA.acknowledgedThrough() == second[2].id, "every event acknowledged, once")
    }

    /// Host A of `fixture`: five countdowns expired, the consumer `mailer` read by one reader,
    /// which handled and acknowledged the first expiry and holds a claim on the other four.
    private func firstOfFiveExpiries(
        _ fixture: Fixture
    ) async throws -> (EventConsumer, CountdownEvents.Iterator, CountdownEvent) {
        let hostA = try await fixture.open()
        for index in 1...5 { try await hostA.start("item-\(index)", duration: .seconds(Int64(index))) }
        try await run(hostA, fixture.clock, for: .seconds(6))
        let mailerA = try await hostA.consumer("mailer")
        var readerA = try await mailerA.events(.expiries).makeAsyncIterator()
        let handled = try #require(try await readerA.next())
        try await mailerA.acknowledge(handled)
        return (mailerA, readerA, handled)
    }

    @Test("A reader that dies keeps its unacknowledged events until its claim runs out; then another reader gets them, and only them, again", arguments: TestEngine.all)
    func deadReadersEventsGoToAnother(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let (_, claimed, handled) = try await firstOfFiveExpiries(fixture)
        var readerA = claimed
        let cutOff = try #require(try await readerA.next())  // handled; its acknowledgement never made
        #expect([handled.key, cutOff.key] == ["item-1", "item-2"])
        // Host A dies here: it neither acknowledges nor stops reading.

        let hostB = try await fixture.open()
        let mailerB = try await hostB.consumer("mailer")
        let readerB = Task { try await take(4, from: try await mailerB.events(.expiries)) }
        try await eventually("host B's reader waits") { fixture.clock.sleeperCount > 0 }
        #expect(try await mailerB.acknowledgedThrough() == handled.id)
        fixture.clock.advance(by: fixture.configuration.claimTimeout - .milliseconds(1))
        fixture.clock.advance(by: .milliseconds(1))
        let taken = try await readerB.value
        #expect(taken.map(\.key) == ["item-2", "item-3", "item-4", "item-5"], "the cut-off one again, then the rest")
        try await mailerB.acknowledge(taken[3])
        #expect(try await mailerB.acknowledgedThrough() == taken[3].id)
        withExtendedLifetime(readerA) {}  // host A's reader never ended
    }

    @Test("Behind a dead reader's claim, a later range with nothing for the readers is handled: once the claim is taken over and acknowledged, the cursor passes both", arguments: TestEngine.all)
    func cursorPassesAHandledRangeBehindATakenOverClaim(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let (_, claimed, handled) = try await firstOfFiveExpiries(fixture)
        let readerA = claimed
        // Host A dies holding its claim on items 2 to 5. Then a start: an event no reader of
        // expiries is given.
        let hostB = try await fixture.open()
        try await hostB.start("later", duration: .seconds(3600))
        let last = try #require(try await hostB.recentEvents(limit: 1).first?.id)
        let mailerB = try await hostB.consumer("mailer")
        let readerB = Task { try await take(4, from: try await mailerB.events(.expiries)) }
        try await eventually("host B's reader waits") { fixture.clock.sleeperCount > 0 }
        // Host B's reader claimed the start's range and found nothing in it; the cursor waits for host A's claim.
        #expect(try await mailerB.acknowledgedThrough() == handled.id)
        fixture.clock.advance(by: fixture.configuration.claimTimeout)
        let taken = try await readerB.value
        #expect(taken.map(\.key) == ["item-2", "item-3", "item-4", "item-5"])
        for event in taken { try await mailerB.acknowledge(event) }
        #expect(try await mailerB.acknowledgedThrough() == last, "the cursor passed the handled range too")
        withExtendedLifetime(readerA) {}  // host A's reader never ended
    }

    @Test("A reader frozen past its claim wakes up without handing out what another reader took over", arguments: TestEngine.all)
    func frozenReaderHandsOutNothingTakenOver(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let (mailerA, claimed, _) = try await firstOfFiveExpiries(fixture)
        var readerA = claimed
        let hostA = mailerA.store
        // Host A freezes here, its claim on items 2 to 5 in hand; it runs out and host B takes it.
        fixture.clock.advance(by: fixture.configuration.claimTimeout)
        let hostB = try await fixture.open()
        let mailerB = try await hostB.consumer("mailer")
        let taken = try await take(4, from: try await mailerB.events(.expiries))
        #expect(taken.map(\.key) == ["item-2", "item-3", "item-4", "item-5"])
        for event in taken { try await mailerB.acknowledge(event) }

        // Host A wakes up: the rest of its claim is no longer its own, so it waits for new events.
        try await hostA.start("item-6", duration: .seconds(1))
        try await run(hostA, fixture.clock, for: .seconds(2))
        let next = try #require(try await readerA.next())
        #expect(next.key == "item-6", "not \(next.key ?? "-"), which host B took over")
    }

    @Test("An acknowledgement from a reader whose claim another reader took over changes nothing and says so", arguments: TestEngine.all)
    func staleAcknowledgementIsFenced(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let (mailerA, claimed, handled) = try await firstOfFiveExpiries(fixture)
        var readerA = claimed
        let stalled = try #require(try await readerA.next())
        #expect(stalled.key == "item-2")
        // Host A stalls past its claim; host B takes the rest of it over.
        fixture.clock.advance(by: fixture.configuration.claimTimeout)
        let hostB = try await fixture.open()
        let mailerB = try await hostB.consumer("mailer")
        var readerB = try await mailerB.events(.expiries).makeAsyncIterator()
        let taken = try #require(try await readerB.next())
        #expect(taken.key == "item-2")

        // A's acknowledgements are stale now: refused, and nothing moves.
        #expect(try await mailerA.acknowledge(stalled) == false)
        #expect(try await mailerA.acknowledge(handled) == false, "passed already: not acknowledged twice")
        #expect(try await mailerA.acknowledgedThrough() == handled.id)
        // B holds the claim: its acknowledgement counts.
        #expect(try await mailerB.acknowledge(taken))
        #expect(try await mailerB.acknowledgedThrough() == taken.id)
        // An event outside every claim (an id not issued yet) is not acknowledged by a reader.
        var foreign = taken
        foreign.id = try await hostB.lastEventID() + 1000
        #expect(try await mailerB.acknowledge(foreign) == false)
        #expect(try await mailerB.acknowledgedThrough() == taken.id)
        withExtendedLifetime(readerA) {}
    }

    @Test("Claims are timed on the clock every reader shares, not the store wall clock: a calibration that moves W an hour ahead hands no claim over", arguments: TestEngine.all)
    func claimsIgnoreTheStoreWallClock(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let (_, claimed, _) = try await firstOfFiveExpiries(fixture)
        let readerA = claimed
        let hostB = try await fixture.open()
        let before = try await hostB.now().wall
        try await hostB.calibrate(serverTime: Date(timeIntervalSince1970: Double(before) / 1000 + 3600))
        #expect(try await hostB.now().wall >= before + 3_600_000)
        _ = try await hostB.consumer("mailer")
        // A's claim on items 2 to 5 still runs: a reader of B finds nothing to take.
        let early = try await hostB.claimEvents(
            consumer: "mailer", claimant: "probe", filter: .expiries, probing: false)
        #expect((early ?? []).isEmpty, "got \(early?.map(\.key) ?? [])")
        fixture.clock.advance(by: fixture.configuration.claimTimeout)
        let taken = try await hostB.claimEvents(
            consumer: "mailer", claimant: "probe", filter: .expiries, probing: false)
        #expect(taken?.map(\.key) == ["item-2", "item-3", "item-4", "item-5"], "once it has run out")
        withExtendedLifetime(readerA) {}
    }

    @Test("A stopping reader keeps a claim it handed events out of: acknowledged after the stop, they go to nobody else", arguments: TestEngine.all)
    func stoppingReaderKeepsWhatItHandedOut(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let (mailerA, claimed, _) = try await firstOfFiveExpiries(fixture)
        var readerA = claimed
        let printed = try #require(try await readerA.next())  // handed out; written, not acknowledged yet
        #expect(printed.key == "item-2")
        let stopped = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await readerA.next()
        }
        #expect(try await stopped.value == nil)
        // The claim holds item 2, handed out: A keeps it whole (order holds within a claim), and
        // acknowledges item 2 after the stop.
        #expect(try await mailerA.acknowledge(printed))
        #expect(try await mailerA.acknowledgedThrough() == printed.id)
        let hostB = try await fixture.open()
        let mailerB = try await hostB.consumer("mailer")
        let reading = Task { try await take(3, from: try await mailerB.events(.expiries)) }
        fixture.clock.advance(by: fixture.configuration.claimTimeout)
        let rest = try await reading.value
        #expect(rest.map(\.key) == ["item-3", "item-4", "item-5"], "item 2 not again")
    }

    @Test("Consumer names follow the key rules", arguments: TestEngine.all)
    func consumerNamesAreValidated(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        await expectError(.invalidArgument) { try await store.consumer("") }
        await expectError(.invalidArgument) { try await store.consumer("bad\nname") }
    }
}
