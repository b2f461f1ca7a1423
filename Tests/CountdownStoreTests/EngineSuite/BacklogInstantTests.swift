import Foundation
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

/// The rule that lets the checkpoint move while expiries wait to be recorded: an expiry's instant
/// never moves. Random sequences of starts, pauses, restarts, heartbeats, lease lapses, suspends,
/// reopenings and reboots run with writes that record one expiry each, so a backlog is almost
/// always waiting; after every step, each countdown seen expired must read the same instant it
/// read before, and the expiry finally recorded must carry it.
///
/// Size: `COUNTDOWN_BACKLOG_SEQUENCES` sequences (40 in CI; 6 on PostgreSQL) of 80 steps.
@Suite("Instants of a backlog")
struct BacklogInstantTests {
    struct Generation: Hashable, CustomStringConvertible {
        var key: String
        var generation: Int64
        var description: String { "\(key)#\(generation)" }
    }

    @Test("An expiry waiting to be recorded keeps its instant whatever the clocks and the host do", arguments: TestEngine.all)
    func instantsNeverMove(engine: TestEngine) async throws {
        let sequences = suiteSize("COUNTDOWN_BACKLOG_SEQUENCES", ci: 40) / (engine == .postgres ? 7 : 1)
        let seed = UInt64(ProcessInfo.processInfo.environment["COUNTDOWN_BACKLOG_SEED"].flatMap(UInt64.init) ?? UInt64(Date().timeIntervalSince1970))
        var failures = 0
        for sequence in 0..<max(1, sequences) {
            let sequenceSeed = seed &+ UInt64(sequence)
            let problems = try await Self.sequence(engine: engine, seed: sequenceSeed, steps: 80)
            if !problems.isEmpty {
                failures += 1
                Issue.record("seed \(sequenceSeed) (COUNTDOWN_BACKLOG_SEED=\(sequenceSeed) COUNTDOWN_BACKLOG_SEQUENCES=1):\n\(problems.prefix(8).joined(separator: "\n"))")
            }
            if failures >= 3 { break }
        }
    }

    /// One sequence; returns what went wrong.
    static func sequence(engine: TestEngine, seed: UInt64, steps: Int) async throws -> [String] {
        var fixture = try Fixture(engine: engine)
        fixture.configuration.expiryBatchSize = 10  // other writes record one expiry each
        fixture.configuration.retention = .keepEverything
        var generator = SeededGenerator(state: seed)
        var store = try await fixture.openTicking()
        var seen: [Generation: Int64] = [:]
        var problems: [String] = []
        var keys: [String] = []
        var log: [String] = []
        for step in 0..<steps {
            let choice = Int.random(in: 0..<100, using: &generator)
            switch choice {
            case 0..<30:
                let key = "k\(keys.count)"
                keys.append(key)
                let policy: CountdownPolicy = Bool.random(using: &generator) ? .wall : .active
                let ms = Int64.random(in: 1...2_500, using: &generator)
                log.append("start \(key) \(ms)ms \(policy)")
                try await store.start(key, duration: .milliseconds(ms), policy: policy)
            case 30..<50:
                let ms = Int64.random(in: 1...1_500, using: &generator)
                log.append("tick \(ms)ms")
                try await CountdownStoreTests.run(store, fixture.clock, for: .milliseconds(ms), step: .milliseconds(400))
            case 50..<58:
                let ms = Int64.random(in: 1...4_000, using: &generator)
                log.append("idle \(ms)ms (the lease may lapse)")
                fixture.clock.advance(by: .milliseconds(ms))
            case 58..<66:
                log.append("expireDue(limit: 1)")
                try await store.expireDue(limit: 1)
            case 66..<72:
                log.append("suspend")
                try await store.enterBackground()
            case 72..<78:
                log.append("resume")
                try await store.enterForeground()
            case 78..<90:
                guard let key = keys.randomElement(using: &generator) else { continue }
                let operation = Int.random(in: 0..<4, using: &generator)
                log.append(["pause", "resume", "restart", "extend"][operation] + " \(key)")
                switch operation {
                case 0: _ = try? await store.pause(key)
                case 1: _ = try? await store.resume(key)
                case 2: _ = try? await store.restart(key)
                default: _ = try? await store.extend(key, by: .milliseconds(300))
                }
            case 90..<93:
                log.append("heartbeat")
                try await store.heartbeat()
            default:
                let reboot = Bool.random(using: &generator)
                let ms = Int64.random(in: 1...3_000, using: &generator)
                log.append(reboot ? "reboot after \(ms)ms" : "reopen after \(ms)ms")
                try await store.close()
                if reboot { fixture.clock.reboot(after: .milliseconds(ms)) } else { fixture.clock.advance(by: .milliseconds(ms)) }
                store = try await fixture.openTicking()
            }
            for item in try await store.list(.expired, limit: 10_000) {
                guard let at = item.expiredAt?.millisecondsSince1970 else { continue }
                let id = Generation(key: item.key, generation: item.generation)
                if let before = seen[id], before != at {
                    problems.append("step \(step + 1) (\(log.last ?? "")): \(id) expired at \(at), read \(before) before\n  steps: \(log.joined(separator: "; "))")
                }
                seen[id] = seen[id] ?? at
            }
            if !problems.isEmpty { break }
        }
        try await store.expireDue()
        for expiry in try await events(store, kind: "expired") {
            let id = Generation(key: expiry.key ?? "", generation: expiry.generation ?? 0)
            if let observed = seen[id], observed != expiry.deadlineAtMs {
                problems.append("\(id) recorded as reaching zero at \(expiry.deadlineAtMs ?? 0), read \(observed) before\n  steps: \(log.joined(separator: "; "))")
            }
        }
        let recorded = try await events(store, kind: "expired").map { Generation(key: $0.key ?? "", generation: $0.generation ?? 0) }
        if Set(recorded).count != recorded.count { problems.append("an expiry recorded twice: \(recorded)") }
        try await store.close()
        return problems
    }
}
