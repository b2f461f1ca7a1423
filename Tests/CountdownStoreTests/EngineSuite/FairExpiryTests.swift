import Foundation
import Testing

@testable import CountdownStoreCore

/// A backlog's expiry batches are shared between groups, on every engine: each batch holds the
/// oldest due countdowns of every group that has any, so that a group with a few due is never
/// behind another group's backlog; within a group the order stays oldest first; every expiry keeps
/// its real lateness and none comes early.
///
/// Size of the property: `COUNTDOWN_FAIRNESS_SEQUENCES` random stores on SQLite (12 by default),
/// a third of them on PostgreSQL; `COUNTDOWN_FAIRNESS_REPLAY=<seed>` replays one.
@Suite("Expiry fair between groups")
struct FairExpiryTests {
    /// A fixture whose ticker records `batch` expiries per transaction, as the mass expiry's.
    static func fixture(_ engine: TestEngine, batch: Int) throws -> Fixture {
        try MassExpiryTests.fixture(engine, batch: batch)
    }

    /// Starts countdowns in bulk: `count` of `group` (nil: of no group), named `prefix-n`, each
    /// due after `duration(n)` ms.
    static func start(
        _ store: CountdownStore, _ prefix: String, group: String?, count: Int, policy: CountdownPolicy = .wall,
        duration: (Int) -> Int64
    ) async throws {
        for first in stride(from: 0, to: count, by: 1000) {
            try await store.start(
                (first..<min(first + 1000, count)).map { index in
                    .countdown(
                        "\(prefix)-\(index)", duration: .milliseconds(duration(index)), group: group, policy: policy)
                })
        }
    }

    @Test(
        "Under a backlog, each batch records the oldest due of every group: a few due in small groups are recorded in the first batch after their deadline, and each group's oldest first",
        arguments: TestEngine.all)
    func smallGroupsBesideABacklog(engine: TestEngine) async throws {
        let fixture = try Self.fixture(engine, batch: 100)
        // The lease holder's store: the active timeline runs.
        let store = try await fixture.openTicking()
        let startedAt = try await store.now().wall
        // The sale: 1,500 due at 10 s. Beside it, ten shops of three due at 10.2–10.4 s, three
        // countdowns of no group, and a shop whose countdowns run on the active timeline.
        try await Self.start(store, "sale", group: "sale", count: 1_500) { _ in 10_000 }
        for shop in 0..<10 {
            try await Self.start(store, "shop\(shop)", group: "shop-\(shop)", count: 3) { 10_200 + Int64($0) * 100 }
        }
        try await Self.start(store, "loose", group: nil, count: 3) { 10_100 + Int64($0) * 100 }
        try await Self.start(store, "act", group: "active-shop", count: 2, policy: .active) { 10_300 + Int64($0) }
        // Due during the drain: a VIP's payment deadline at 11 s.
        try await Self.start(store, "vip", group: "vip", count: 1) { _ in 11_000 }
        try await run(store, fixture.clock, for: .milliseconds(9_900))
        fixture.clock.advance(by: .milliseconds(600))

        var batches: [[Countdown]] = [try await store.expireDue(limit: 100)]
        let first = Set(batches[0].map(\.key))
        let small = (0..<10).flatMap { shop in (0..<3).map { "shop\(shop)-\($0)" } }
        // Of no group, and on the active timeline, too.
        let missing = (small + ["loose-0", "loose-1", "loose-2", "act-0", "act-1"]).filter { !first.contains($0) }
        #expect(missing.isEmpty, "every small group's due countdowns in the first batch; not there: \(missing)")
        #expect(!first.contains("vip-0"), "nothing before its deadline")
        #expect(batches[0].count == 100, "the rest of the batch is the sale's")
        // The VIP's deadline passes while the sale is still draining.
        fixture.clock.advance(by: .milliseconds(600))
        let next = try await store.expireDue(limit: 100)
        batches.append(next)
        #expect(next.contains { $0.key == "vip-0" }, "the VIP in the first batch after its deadline")
        while true {
            let batch = try await store.expireDue(limit: 100)
            if batch.isEmpty { break }
            batches.append(batch)
        }
        let expiries = try await events(store, kind: "expired")
        let started = 1_500 + 30 + 3 + 2 + 1
        #expect(expiries.count == started, "every one recorded")
        #expect(Set(expiries.compactMap(\.key)).count == expiries.count, "each once")
        // Within each group, oldest first; every lateness real, none early.
        var lastDeadline: [String: Int64] = [:]
        let items = try await store.list(.expired, limit: 2_000)
        let groups = Dictionary(uniqueKeysWithValues: items.map { ($0.key, $0.group ?? "") })
        for expiry in expiries {
            let key = try #require(expiry.key)
            let group = groups[key] ?? "?"
            let deadline = try #require(expiry.deadlineAtMs)
            #expect(deadline >= lastDeadline[group] ?? .min, "\(group): oldest first")
            lastDeadline[group] = deadline
            #expect(deadline >= startedAt + 10_000)
            let fired = try #require(expiry.firedAtMs)
            #expect(fired >= deadline && expiry.lateMs == fired - deadline, "\(key): real lateness, never early")
        }
        try await store.close()
    }

    @Test("With more groups than a batch holds, batches take them in turn, from where the last stopped", arguments: TestEngine.all)
    func moreGroupsThanABatch(engine: TestEngine) async throws {
        let fixture = try Self.fixture(engine, batch: 10)
        let store = try await fixture.open()
        try await Self.start(store, "big", group: "big", count: 200) { _ in 1_000 }
        for group in 0..<25 {
            try await Self.start(store, "g\(group)", group: String(format: "g%02d", group), count: 1) { _ in 1_500 }
        }
        fixture.clock.advance(by: .seconds(2))
        var batchOf: [String: Int] = [:]
        var number = 0
        while true {
            let batch = try await store.expireDue(limit: 10)
            if batch.isEmpty { break }
            for item in batch { batchOf[item.key] = number }
            number += 1
        }
        // 26 groups due, 10 to a batch: every small group within the first three batches.
        for group in 0..<25 {
            let batch = try #require(batchOf["g\(group)-0"])
            #expect(batch < 3, "g\(group) in batch \(batch)")
        }
        #expect(batchOf.count == 225)
        try await store.close()
    }

    static var sequences: [UInt64] {
        let environment = ProcessInfo.processInfo.environment
        if let replay = environment["COUNTDOWN_FAIRNESS_REPLAY"].flatMap(UInt64.init) { return [replay] }
        let count = environment["COUNTDOWN_FAIRNESS_SEQUENCES"].flatMap(Int.init) ?? 12
        var seeds = SeededGenerator(state: UInt64(Date().timeIntervalSince1970))
        return (0..<count).map { _ in seeds.next() % 1_000_000_007 }
    }

    @Test("Property: random due countdowns in random groups; no group's first due countdown waits behind more than one batch of another group's, and each group's are recorded oldest first", arguments: TestEngine.all)
    func property(engine: TestEngine) async throws {
        let seeds = Self.sequences
        for seed in engine == .sqlite ? seeds : Array(seeds.prefix(max(1, seeds.count / 3))) {
            try await Self.check(seed: seed, engine: engine)
        }
    }

    /// One random store: groups of random sizes (one of them large, sometimes none), deadlines
    /// spread over a few seconds, drained by batches of a random size, time passing between them.
    static func check(seed: UInt64, engine: TestEngine) async throws {
        var random = SeededGenerator(state: seed)
        let batch = Int.random(in: 5...40, using: &random)
        let fixture = try Self.fixture(engine, batch: batch)
        let store = try await fixture.open()
        let groupCount = Int.random(in: 1...12, using: &random)
        var deadlines: [String: Int64] = [:]
        var groupOf: [String: String] = [:]
        let startedAt = try await store.now().wall
        for group in 0..<groupCount {
            let size = group == 0 && Bool.random(using: &random) ? 400 : Int.random(in: 1...30, using: &random)
            let name = group == groupCount - 1 && groupCount > 1 && Bool.random(using: &random) ? nil : "grp\(group)"
            let spread = Int64.random(in: 0...3_000, using: &random)
            let base = Int64.random(in: 1_000...4_000, using: &random)
            var durations: [Int64] = []
            for _ in 0..<size { durations.append(base + Int64.random(in: 0...spread, using: &random)) }
            for (index, duration) in durations.enumerated() {
                deadlines["k\(group)-\(index)"] = startedAt + duration
                groupOf["k\(group)-\(index)"] = name ?? "(none)"
            }
            try await Self.start(store, "k\(group)", group: name, count: size) { durations[$0] }
        }
        // Time passes in random steps; after each, one batch is recorded.
        var recordedInBatch: [String: Int] = [:]
        var batchInstants: [Int64] = []
        var number = 0
        fixture.clock.advance(by: .milliseconds(Int64.random(in: 1_000...4_000, using: &random)))
        while recordedInBatch.count < deadlines.count {
            let now = try await store.now().wall
            let recorded = try await store.expireDue(limit: batch)
            for item in recorded { recordedInBatch[item.key] = number }
            batchInstants.append(now)
            number += 1
            fixture.clock.advance(by: .milliseconds(Int64.random(in: 0...400, using: &random)))
            #expect(number < 10_000, "seed \(seed): the drain ends")
            if number >= 10_000 { break }
        }
        let dueGroups = Set(groupOf.values).count
        // A group's first due countdown: recorded in the first batch after its deadline, or, when
        // more groups were due than a batch holds, within as many batches as it takes to visit them.
        let allowed = (dueGroups + batch - 1) / batch
        for group in Set(groupOf.values) {
            let keys = groupOf.filter { $0.value == group }.map(\.key)
            let first = try #require(keys.min { (deadlines[$0]!, $0) < (deadlines[$1]!, $1) })
            let firstBatchAfter = batchInstants.firstIndex { $0 >= deadlines[first]! } ?? 0
            let recorded = try #require(recordedInBatch[first], "seed \(seed): \(first) recorded")
            #expect(
                recorded - firstBatchAfter < allowed,
                "seed \(seed) (COUNTDOWN_FAIRNESS_REPLAY=\(seed)): \(group)'s first due, \(first), recorded in batch \(recorded), due before batch \(firstBatchAfter)")
        }
        // Each group oldest first, every expiry at its deadline or later with its real lateness.
        let expiries = try await events(store, kind: "expired")
        #expect(expiries.count == deadlines.count, "seed \(seed): every one once")
        var last: [String: Int64] = [:]
        for expiry in expiries {
            let key = try #require(expiry.key)
            let group = groupOf[key] ?? "?"
            let deadline = try #require(expiry.deadlineAtMs)
            #expect(deadline == deadlines[key], "seed \(seed): \(key) reached zero at its deadline")
            #expect(deadline >= last[group] ?? .min, "seed \(seed): \(group) oldest first")
            last[group] = deadline
            #expect((expiry.firedAtMs ?? 0) >= deadline && expiry.lateMs == (expiry.firedAtMs ?? 0) - deadline)
        }
        try await store.close()
    }
}
