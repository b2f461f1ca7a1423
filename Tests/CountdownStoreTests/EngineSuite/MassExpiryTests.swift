import Foundation
import Testing

@testable import CountdownStoreCore

/// However many countdowns come due at once, on every engine, their expiries are recorded oldest
/// first, in batches, each with the instant it reached zero, exactly once; meanwhile every reader
/// sees every due countdown expired at that instant, an operation on one records its expiry first,
/// and a backlog keeps its instants when the lease runs out, the host suspends or nothing ran.
@Suite("Mass expiry")
struct MassExpiryTests {
    /// A fixture whose ticker records `batch` expiries per transaction (other writes a tenth).
    static func fixture(_ engine: TestEngine, batch: Int) throws -> Fixture {
        var fixture = try Fixture(engine: engine)
        fixture.configuration.expiryBatchSize = batch
        fixture.configuration.retention = .keepEverything
        return fixture
    }

    /// Starts `count` countdowns in bulk: half due together at 10 s, the rest spread over the next second.
    static func startSale(_ store: CountdownStore, count: Int) async throws -> [String: Int64] {
        var durations: [String: Int64] = [:]
        for first in stride(from: 0, to: count, by: 1000) {
            let requests = (first..<min(first + 1000, count)).map { index -> CountdownRequest in
                let ms = Int64(index % 2 == 0 ? 10_000 : 10_000 + index % 1000)
                durations["sale-\(index)"] = ms
                return .countdown("sale-\(index)", duration: .milliseconds(ms), group: "sale")
            }
            try await store.start(requests)
        }
        return durations
    }

    @Test("A ticker records a mass expiry oldest first, each once, at the instant it reached zero, however many are due", arguments: TestEngine.all)
    func tickerRecordsABacklogInBatches(engine: TestEngine) async throws {
        let fixture = try Self.fixture(engine, batch: 100)
        let store = try await fixture.open()
        let running = await RunningTicker(store)
        let startedAt = try await store.now().wall
        let durations = try await Self.startSale(store, count: 2_000)
        await running.advance(fixture.clock, by: .seconds(12), step: .seconds(1))
        let expiries = try await events(store, kind: "expired")
        #expect(expiries.count == 2_000, "every expiry recorded")
        #expect(Set(expiries.compactMap(\.key)).count == 2_000, "each once")
        for expiry in expiries {
            let key = try #require(expiry.key)
            let duration = try #require(durations[key])
            #expect(expiry.deadlineAtMs == startedAt + duration, "\(key) reached zero at start + duration")
            #expect((expiry.lateMs ?? -1) >= 0 && (expiry.firedAtMs ?? 0) >= (expiry.deadlineAtMs ?? .max))
        }
        let deadlines = expiries.compactMap(\.deadlineAtMs)
        #expect(deadlines == deadlines.sorted(), "oldest first")
        try await running.stop()
        try await store.close()
    }

    @Test("While a backlog is recorded, every reader sees each due countdown expired at the instant it reached zero", arguments: TestEngine.all)
    func readersSeeTheBacklogExpired(engine: TestEngine) async throws {
        let fixture = try Self.fixture(engine, batch: 50)
        let store = try await fixture.openTicking()
        let startedAt = try await store.now().wall
        let durations = try await Self.startSale(store, count: 600)
        try await run(store, fixture.clock, for: .seconds(12))  // heartbeats: each records a few
        for _ in 0..<3 {
            try await store.expireDue(limit: 50)
            try await run(store, fixture.clock, for: .seconds(1))
        }
        let recorded = try await events(store, kind: "expired").count
        #expect(recorded > 0 && recorded < 600, "part of the backlog is recorded: \(recorded)")
        let expired = try await store.list(.expired, limit: 1_000)
        #expect(expired.count == 600)
        for item in expired {
            let expectedMs = startedAt + (durations[item.key] ?? 0)
            #expect(item.expiredAt?.millisecondsSince1970 == expectedMs, "\(item.key): \(String(describing: item.expiredAt))")
        }
        #expect(try await store.active(limit: 10).items.isEmpty)
        try await store.expireDue()
        let expiries = try await events(store, kind: "expired")
        #expect(expiries.count == 600 && Set(expiries.compactMap(\.key)).count == 600)
        for expiry in expiries {
            #expect(expiry.deadlineAtMs == startedAt + (durations[expiry.key ?? ""] ?? 0))
        }
        try await store.close()
    }

    @Test("An operation on a countdown waiting in a backlog records its expiry first", arguments: TestEngine.all)
    func operationOnADueCountdownRecordsItsExpiry(engine: TestEngine) async throws {
        let fixture = try Self.fixture(engine, batch: 10)
        let store = try await fixture.openTicking()
        _ = try await Self.startSale(store, count: 300)
        try await run(store, fixture.clock, for: .seconds(12))
        #expect(try await events(store, key: "sale-250", kind: "expired").isEmpty, "still in the backlog")
        let restarted = try await store.restart("sale-250")
        #expect(restarted.state == .running && restarted.generation == 2)
        await #expect(throws: CountdownError.self) { try await store.pause("sale-251") }  // expired: refused
        let history = try await events(store, key: "sale-250").map { "\($0.kind) \($0.generation ?? 0)" }
        #expect(history == ["started 1", "expired 1", "restarted 2"])
        try await store.expireDue()
        #expect(try await events(store, key: "sale-250", kind: "expired").count == 1)
        #expect(try await events(store, key: "sale-251", kind: "expired").count == 1)
        try await store.close()
    }

    @Test("A backlog of `active` countdowns keeps its instants when the lease runs out or the host suspends", arguments: TestEngine.all)
    func activeBacklogKeepsItsInstants(engine: TestEngine) async throws {
        let fixture = try Self.fixture(engine, batch: 10)
        let store = try await fixture.openTicking()
        let startedAt = try await store.now().wall
        try await store.start((0..<200).map { .countdown("a-\($0)", duration: .milliseconds(5_000 + Int64($0)), policy: .active) })
        try await run(store, fixture.clock, for: .seconds(6))
        let before = try await store.list(.expired, limit: 1_000)
        #expect(before.count == 200)
        for item in before {
            #expect(item.expiredAt?.millisecondsSince1970 == startedAt + 5_000 + Int64(item.key.dropFirst(2))!)
        }
        // The lease runs out: from now time is background gap, and A stands still. A write whose
        // move would place the backlog elsewhere leaves the checkpoint where it is.
        fixture.clock.advance(by: .seconds(30))
        try await store.start("later", duration: .minutes(5))
        let after = try await store.list(.expired, limit: 1_000)
        #expect(after.map(\.expiredAt) == before.map(\.expiredAt), "the instants did not move")
        // Suspending must move the checkpoint: it records the backlog first.
        try await store.enterBackground()
        let expiries = try await events(store, kind: "expired")
        #expect(expiries.count == 200)
        for expiry in expiries {
            let index = Int64(expiry.key?.dropFirst(2) ?? "") ?? -1
            #expect(expiry.deadlineAtMs == startedAt + 5_000 + index, "\(expiry.key ?? "")")
        }
        try await store.enterForeground()
        try await store.close()
    }

    @Test("Opening after a downtime catches up a backlog in batches, each at its real instant and lateness", arguments: TestEngine.all)
    func catchUpAfterDowntime(engine: TestEngine) async throws {
        let fixture = try Self.fixture(engine, batch: 100)
        var startedAt: Int64 = 0
        do {
            let store = try await fixture.openTicking()
            startedAt = try await store.now().wall
            try await store.start((0..<1_000).map { .countdown("c-\($0)", duration: .seconds(60 + Int64($0 % 100))) })
            try await store.close()
        }
        fixture.clock.reboot(after: .minutes(10))
        let store = try await fixture.open()
        let running = await RunningTicker(store)
        let expiries = try await events(store, kind: "expired")
        #expect(expiries.count == 1_000)
        for expiry in expiries {
            let index = Int64(expiry.key?.dropFirst(2) ?? "") ?? -1
            #expect(expiry.deadlineAtMs == startedAt + (60 + index % 100) * 1000)
            #expect((expiry.lateMs ?? 0) >= 600_000 - (60 + index % 100) * 1000 - 1000)
        }
        let deadlines = expiries.compactMap(\.deadlineAtMs)
        #expect(deadlines == deadlines.sorted(), "oldest first")
        try await running.stop()
        try await store.close()
    }
}
