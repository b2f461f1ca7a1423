import Foundation
import Testing

@testable import CountdownStoreCore

/// Cooldowns and debounced countdowns, on every engine: one atomic answer for a cooldown; a
/// debounce's deadline that moves with each call, never past its bound, and one expiry per burst.
@Suite("Cooldowns and debounce")
struct CooldownDebounceTests {
    @Test("A cooldown is allowed once, then answers how long is left and changes nothing", arguments: TestEngine.all)
    func cooldownAllowsOnce(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let first = try await store.cooldown("export", duration: .seconds(3600), group: "jobs", payload: .text("a"))
        guard case .allowed(let started) = first else {
            Issue.record("expected allowed, got \(first)")
            return
        }
        #expect(started.rule == .cooldown && started.remaining == .seconds(3600) && started.group == "jobs")

        fixture.clock.advance(by: .seconds(600))
        let second = try await store.cooldown("export", duration: .seconds(60), payload: .text("b"))
        guard case .coolingDown(let remaining, let endsAt, let running) = second else {
            Issue.record("expected coolingDown, got \(second)")
            return
        }
        #expect(remaining == .seconds(3000) && !second.isAllowed && second.retryAfterSeconds == 3000)
        #expect(endsAt == started.startedAt.addingTimeInterval(3600))
        #expect(running.duration == .seconds(3600) && running.payload == .text("a"), "the running cooldown is untouched")
        #expect(try await events(store, key: "export").map(\.kind) == ["started"], "a refusal records nothing")

        // Once it is over, the next call is allowed again, in a new generation.
        fixture.clock.advance(by: .seconds(3000))
        let third = try await store.cooldown("export", duration: .seconds(3600))
        #expect(third.isAllowed && third.countdown.generation == 2 && third.countdown.rule == .cooldown)
        #expect(try await events(store, key: "export").map(\.kind) == ["started", "expired", "replaced"])
    }

    @Test("Callers racing for one cooldown: exactly one is allowed", arguments: TestEngine.all)
    func racingCallersGetOneAllowed(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let stores = [try await fixture.open(), try await fixture.open()]
        let allowed = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<32 {
                group.addTask {
                    try await stores[index % 2].cooldown("resend:+15550100", duration: .seconds(60)).isAllowed
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(allowed == 1)
        for store in stores { try await store.close() }
    }

    @Test("A debounce moves its deadline with each call, never past its bound, and expires once per burst", arguments: TestEngine.all)
    func debounceBurst(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()  // wall time counts without a ticker
        let first = try await store.debounce("cart-42", quiet: .seconds(300), maxWait: .seconds(1800), payload: .text("v1"))
        #expect(first.rule == .debounce && first.maxWait == .seconds(1800) && first.remaining == .seconds(300))
        #expect(first.boundAt == first.startedAt.addingTimeInterval(1800))
        #expect(first.deadlineAt == first.startedAt.addingTimeInterval(300))

        // A change every 4 minutes: each moves the deadline to 5 minutes from then...
        var last = first
        for step in 1...6 {
            fixture.clock.advance(by: .seconds(240))
            last = try await store.debounce("cart-42", quiet: .seconds(300), maxWait: .seconds(1800), payload: .text("v\(step + 1)"))
            let wanted = min(Double(step * 240 + 300), 1800)
            #expect(last.deadlineAt == first.startedAt.addingTimeInterval(wanted), "call \(step)")
            #expect(last.generation == 1 && last.state == .running)
        }
        // ...until the bound: 30 minutes after the first change, however many changes come.
        fixture.clock.advance(by: .seconds(240))
        let capped = try await store.debounce("cart-42", quiet: .seconds(300), maxWait: .seconds(1800))
        #expect(capped.deadlineAt == first.startedAt.addingTimeInterval(1800) && capped.payload == .text("v7"))
        fixture.clock.advance(by: .seconds(60))
        let atBound = try await store.debounce("cart-42", quiet: .seconds(300), maxWait: .seconds(1800))
        #expect(atBound.deadlineAt == capped.deadlineAt && atBound.payload == .text("v7"), "no payload: kept")
        fixture.clock.advance(by: .seconds(140))
        let over = try #require(try await store.countdown("cart-42"))
        #expect(over.state == .expired && over.expiredAt == first.startedAt.addingTimeInterval(1800))

        // The next call records the expiry (no ticker runs here) and starts a new burst, in a new generation.
        let next = try await store.debounce("cart-42", quiet: .seconds(300), maxWait: .seconds(1800))
        #expect(next.generation == 2 && next.remaining == .seconds(300) && next.payload == nil)
        let expiries = try await events(store, key: "cart-42", kind: "expired")
        #expect(expiries.count == 1 && expiries.first?.generation == 1 && expiries.first?.lateMs == 80_000)
        #expect(try await events(store, key: "cart-42", kind: "postponed").count == 7, "the call at the bound moved nothing")
        try await store.close()
    }

    @Test("A quiet debounce expires quiet after its last call; a shorter quiet never moves the deadline earlier", arguments: TestEngine.all)
    func debounceQuiet(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        let first = try await store.debounce("doc", quiet: .seconds(2), maxWait: .seconds(10))
        try await run(store, fixture.clock, for: .seconds(1))
        let moved = try await store.debounce("doc", quiet: .seconds(2), maxWait: .seconds(10))
        #expect(moved.deadlineAt == first.startedAt.addingTimeInterval(3))
        let shorter = try await store.debounce("doc", quiet: .milliseconds(500), maxWait: .seconds(10))
        #expect(shorter.deadlineAt == moved.deadlineAt, "never earlier")
        try await run(store, fixture.clock, for: .seconds(2))
        let over = try #require(try await store.countdown("doc"))
        #expect(over.state == .expired && over.expiredAt == first.startedAt.addingTimeInterval(3))
        try await store.close()
    }

    @Test("A paused debounce keeps its time; its bound moves later by the pause", arguments: TestEngine.all)
    func pausedDebounce(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        let first = try await store.debounce("sync", quiet: .seconds(10), maxWait: .seconds(60))
        try await run(store, fixture.clock, for: .seconds(5))
        try await store.pause("sync")
        let paused = try await store.debounce("sync", quiet: .seconds(10), maxWait: .seconds(60))
        #expect(paused.state == .paused && paused.remaining == .seconds(10) && paused.boundAt == nil)
        try await run(store, fixture.clock, for: .seconds(100))
        let resumed = try await store.resume("sync")
        #expect(resumed.remaining == .seconds(10))
        #expect(resumed.boundAt == first.startedAt.addingTimeInterval(160), "60 s of counted time, plus the 100 s pause")
        await expectError(.invalidDuration) { try await store.extend("sync", by: .seconds(60)) }
        #expect(try await store.extend("sync", by: .seconds(40)).duration == .seconds(55))
        try await store.close()
    }

    @Test("Bad input and a key of another rule are refused by name, and change nothing", arguments: TestEngine.all)
    func refusals(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.start("plain", duration: .seconds(60))
        try await store.startStopwatch("watch")
        _ = try await store.cooldown("cool", duration: .seconds(60))
        try await store.debounce("bounce", quiet: .seconds(5), maxWait: .seconds(50))
        let before = try await events(store).count

        let short = await expectError(.invalidDuration) {
            try await store.debounce("new", quiet: .seconds(10), maxWait: .seconds(5))
        }
        #expect(short?.message.contains("maximum wait 5s") == true && short?.message.contains("quiet period 10s") == true)
        await expectError(.invalidDuration) { try await store.debounce("new", quiet: .zero, maxWait: .seconds(5)) }
        await expectError(.invalidDuration) { try await store.debounce("new", quiet: .seconds(-1), maxWait: .seconds(5)) }
        await expectError(.invalidDuration) { try await store.cooldown("new", duration: .zero) }
        await expectError(.invalidKey) { try await store.cooldown("", duration: .seconds(1)) }
        for (key, holds) in [("plain", "a plain countdown"), ("watch", "a stopwatch"), ("bounce", "a debounced countdown")] {
            let refused = await expectError(.wrongState) { try await store.cooldown(key, duration: .seconds(1)) }
            #expect(refused?.message.contains("holds \(holds)") == true, "\(refused?.message ?? "")")
        }
        for (key, holds) in [("plain", "a plain countdown"), ("watch", "a stopwatch"), ("cool", "a cooldown")] {
            let refused = await expectError(.wrongState) {
                try await store.debounce(key, quiet: .seconds(1), maxWait: .seconds(2))
            }
            #expect(refused?.message.contains("holds \(holds)") == true, "\(refused?.message ?? "")")
        }
        #expect(try await events(store).count == before, "nothing was written")
        #expect(try await store.countdown("new") == nil)

        // A plain start meets a cooldown or a debounce as any active countdown; replace makes it plain.
        await expectError(.alreadyActive) { try await store.start("cool", duration: .seconds(5)) }
        let replaced = try await store.start("bounce", duration: .seconds(5), whenActive: .replace)
        #expect(replaced.rule == nil && replaced.maxWait == nil && replaced.generation == 2)
        try await store.close()
    }
}
