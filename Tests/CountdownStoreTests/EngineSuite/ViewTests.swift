import Foundation
import GRDB
import PostgresNIO
import Testing

@testable import CountdownStoreCore
@testable import CountdownStorePostgres

/// The views compute their figures at query time from the system clock (on PostgreSQL, the
/// server's); the Swift API from the boot clock. On the real clock they must agree within 50 ms,
/// on every engine.
@Suite("Views")
struct ViewTests {
    struct ViewRow: Sendable, Hashable {
        var key: String
        var state: String
        var remainingMs: Int64?
        var elapsedMs: Int64
        var startedAt: String
        var deadlineAt: String?
        var expiredAt: String?
        var rule: String?
        var maxWaitMs: Int64?
        var boundAt: String?
    }

    private func rows(_ store: CountdownStore, _ view: String) async throws -> [String: ViewRow] {
        if let engine = store.engine as? PostgresEngine, let schema = engine.schema {
            var result: [String: ViewRow] = [:]
            let sql = """
                SELECT key, state, remaining_ms, elapsed_ms, started_at, deadline_at, expired_at, rule, max_wait_ms,
                    bound_at
                FROM "\(schema)".\(view)
                """
            let rows = try await PostgresFixtures.client().query(PostgresQuery(unsafeSQL: sql))
            for try await (key, state, remaining, elapsed, started, deadline, expired, rule, maxWait, bound)
                in rows.decode((String, String, Int64?, Int64, String, String?, String?, String?, Int64?, String?).self)
            {
                result[key] = ViewRow(
                    key: key, state: state, remainingMs: remaining, elapsedMs: elapsed, startedAt: started,
                    deadlineAt: deadline, expiredAt: expired, rule: rule, maxWaitMs: maxWait, boundAt: bound)
            }
            return result
        }
        return try await store.grdb.read { db in
            var result: [String: ViewRow] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT * FROM \(view)") {
                let key: String = row["key"]
                result[key] = ViewRow(
                    key: key, state: row["state"], remainingMs: row["remaining_ms"], elapsedMs: row["elapsed_ms"],
                    startedAt: row["started_at"], deadlineAt: row["deadline_at"], expiredAt: row["expired_at"],
                    rule: row["rule"], maxWaitMs: row["max_wait_ms"], boundAt: row["bound_at"])
            }
            return result
        }
    }

    /// Whether `text` is an ISO-8601 UTC instant with milliseconds, like `2026-11-21T08:33:16.123Z`.
    static func isISO(_ text: String?) -> Bool {
        guard let text else { return false }
        return text.wholeMatch(of: #/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/#) != nil
    }

    /// The view read just before and just after the API must bracket the API's figures, within 50 ms:
    /// the views and the Swift API compute the same model, only at slightly different instants.
    private func expectAgreement(_ store: CountdownStore, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let before = try await rows(store, "active_countdowns")
        let items = try await store.active(limit: 1000).items
        let after = try await rows(store, "active_countdowns")
        #expect(Set(before.keys) == Set(items.map(\.key)), sourceLocation: sourceLocation)
        func within(_ value: Int64, _ first: Int64, _ second: Int64) -> Bool {
            value >= min(first, second) - 50 && value <= max(first, second) + 50
        }
        for item in items {
            let early = try #require(before[item.key], sourceLocation: sourceLocation)
            let late = try #require(after[item.key], sourceLocation: sourceLocation)
            #expect(early.state == item.state.rawValue, sourceLocation: sourceLocation)
            if let remaining = item.remaining {
                let (first, second) = (try #require(early.remainingMs), try #require(late.remainingMs))
                #expect(within(remaining.milliseconds, first, second), "\(item.key): API \(remaining), views \(first) and \(second) ms", sourceLocation: sourceLocation)
            } else {
                #expect(early.remainingMs == nil, sourceLocation: sourceLocation)
            }
            #expect(within(item.elapsed.milliseconds, early.elapsedMs, late.elapsedMs), "\(item.key)", sourceLocation: sourceLocation)
            #expect(Self.isISO(early.startedAt), "\(early.startedAt)", sourceLocation: sourceLocation)
            #expect(early.startedAt == StoreTime.iso8601(item.startedAt), sourceLocation: sourceLocation)
            // A running countdown has a deadline, except an active one while nobody ticks.
            if item.deadlineAt != nil {
                #expect(Self.isISO(early.deadlineAt), sourceLocation: sourceLocation)
            } else {
                #expect(early.deadlineAt == nil, "\(item.key)", sourceLocation: sourceLocation)
            }
            #expect(early.rule == item.rule?.rawValue, "\(item.key)", sourceLocation: sourceLocation)
            #expect(early.maxWaitMs == item.maxWait?.milliseconds, "\(item.key)", sourceLocation: sourceLocation)
            // A running debounce's bound, placed on W as its deadline is.
            if let boundAt = item.boundAt {
                let viewed = try #require(early.boundAt, "\(item.key)", sourceLocation: sourceLocation)
                #expect(Self.isISO(viewed) && viewed == StoreTime.iso8601(boundAt), "\(viewed)", sourceLocation: sourceLocation)
            } else {
                #expect(early.boundAt == nil, "\(item.key)", sourceLocation: sourceLocation)
            }
        }
    }

    @Test("The views agree with the API within 50 ms while a lease holder ticks", arguments: TestEngine.all)
    func viewsAgreeWhileTicking(engine: TestEngine) async throws {
        var fixture = try Fixture(engine: engine)
        // The real clock: a lease long enough not to run out however slow the machine (a 2 s
        // lease ran out on a loaded machine before the reads, and the active item stood still).
        fixture.configuration = .init(leaseDuration: .minutes(10))
        let store = try await fixture.open()
        try await store.heartbeat()
        try await store.start("wall", duration: .minutes(15), group: "payments")
        try await store.start("active", duration: .minutes(5), policy: .active)
        try await store.start("paused", duration: .minutes(1))
        try await store.pause("paused")
        try await store.startStopwatch("watch")
        _ = try await store.cooldown("cool", duration: .minutes(3))
        try await store.debounce("bounce", quiet: .minutes(2), maxWait: .minutes(20))
        try await store.debounce("bounce-active", quiet: .minutes(2), maxWait: .minutes(20), policy: .active)
        try await store.heartbeat()
        try await expectAgreement(store)
    }

    @Test("With no lease holder after a graceful stop, active items show the value of the final heartbeat", arguments: TestEngine.all)
    func viewsFreezeActiveItemsWithoutALeaseHolder(engine: TestEngine) async throws {
        // The store last ran a minute ago (its clock reads a minute behind the real one),
        // ticked for 10 s, and stopped; the views read the real clock.
        let clock = VirtualClock(start: Date().addingTimeInterval(-60), bootIdentity: nil)
        var fixture = try Fixture(clock: clock, engine: engine)
        let store = try await fixture.open()
        try await store.heartbeat()
        try await store.start("active", duration: .minutes(5), policy: .active)
        try await store.start("wall", duration: .minutes(5), policy: .wall)
        try await run(store, clock, for: .seconds(10))
        try await store.close()

        let lastHeartbeat = clock.systemMilliseconds
        fixture.configuration = .init()
        let reader = try await fixture.open()
        let realBefore = Date().millisecondsSince1970
        let viewRows = try await rows(reader, "active_countdowns")
        let realAfter = Date().millisecondsSince1970
        #expect(viewRows["active"]?.elapsedMs == 10_000, "frozen at the final heartbeat")
        // Wall time kept counting: 10 s ticked plus the (about a minute of) real time since the last heartbeat.
        let wallElapsed = try #require(viewRows["wall"]?.elapsedMs)
        #expect(wallElapsed >= 10_000 + realBefore - lastHeartbeat - 50, "\(wallElapsed)")
        #expect(wallElapsed <= 10_000 + realAfter - lastHeartbeat + 50, "\(wallElapsed)")

        // A store opened now on the real clock agrees with the views.
        try await expectAgreement(reader)
    }

    @Test("After a lease holder dies, active items stand where its lease ran out, in the views and the API alike", arguments: TestEngine.all)
    func viewsHoldActiveItemsWhereADeadHoldersLeaseRanOut(engine: TestEngine) async throws {
        // The holder last ran a minute ago (its clock reads a minute behind the real one), ticked
        // for 10 s and was killed: its lease ran out 2 s after its last heartbeat.
        let clock = VirtualClock(start: Date().addingTimeInterval(-60), bootIdentity: nil)
        var fixture = try Fixture(clock: clock, engine: engine)
        var holder: CountdownStore? = try await fixture.openTicking()
        try await holder!.start("active", duration: .minutes(5), policy: .active)
        try await holder!.start("short", duration: .seconds(11), policy: .active)  // reached zero 1 s after the last heartbeat
        try await run(holder!, clock, for: .seconds(10))
        let lastHeartbeat = clock.systemMilliseconds
        holder = nil

        fixture.configuration = .init()
        let reader = try await fixture.open()
        let viewRows = try await rows(reader, "countdown_figures")
        #expect(viewRows["active"]?.elapsedMs == 12_000, "counted until the lease ran out")
        #expect(viewRows["short"]?.state == "expired")
        #expect(viewRows["short"]?.expiredAt == StoreTime.iso8601(milliseconds: lastHeartbeat + 1000), "the instant it reached zero")
        #expect(try await reader.countdown("active")?.elapsed == .seconds(12))
        try await expectAgreement(reader)
    }

    @Test("Expired items show in expired_countdowns with an ISO-8601 expiry instant", arguments: TestEngine.all)
    func expiredView(engine: TestEngine) async throws {
        let clock = VirtualClock(start: Date())
        let fixture = try Fixture(clock: clock, engine: engine)
        let store = try await fixture.open()
        try await store.start("done", duration: .seconds(1), group: "g")
        clock.advance(by: .seconds(2))
        let expired = try #require(try await store.expireDue().first)
        let row = try #require(try await rows(store, "expired_countdowns")["done"])
        #expect(row.state == "expired" && row.remainingMs == 0 && row.elapsedMs == 1000)
        #expect(row.expiredAt == StoreTime.iso8601(try #require(expired.expiredAt)))
        #expect(try await rows(store, "active_countdowns").isEmpty)
    }
}
