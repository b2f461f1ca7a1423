import Foundation
import PropertyBased
import Testing

@testable import CountdownStoreCore

/// Debounced countdowns under random bursts of calls at random instants, time with and without a
/// ticker, clock edits, restarts and reboots, checked against a reference kept on each item's own
/// timeline (the one its policy counts: `A + G` for `wall`, `A` for `active`, read from the
/// store's clocks as every operation sees them).
///
/// After every call: the countdown's deadline is `min(max(previous deadline, now + quiet), bound)`
/// on its timeline, where the bound is `maxWait` after its burst's first call; it never passes
/// the bound (`deadlineAt <= boundAt` on the wall clock too) and never moves earlier; a call at
/// or after the deadline starts a new burst in the next generation. At the end, every burst has
/// expired exactly once, in its generation, at its last deadline.
///
/// Size: `COUNTDOWN_DEBOUNCE_SEQUENCES` sequences on SQLite (40 in CI), a quarter of them on
/// PostgreSQL, of up to 40 steps; `COUNTDOWN_DEBOUNCE_REPLAY=<numbers>` replays one input.
@Suite("Debounce, property-based")
struct DebouncePropertyTests {
    static let quiets: [Int64] = [200, 1000, 2500]
    static let maxWaits: [Int64] = [2500, 4000, 9000]
    static let waits: [Int64] = [0, 100, 400, 999, 1000, 1500, 2600]
    static let maxSteps = 40

    /// One step, decoded from one generated number.
    enum Step: CustomStringConvertible {
        /// A call of the debounce under `key` (`w`: wall, `a`: active), with a quiet period and a maximum wait.
        case call(String, quiet: Int64, maxWait: Int64)
        /// Time passes with no ticker.
        case idle(Int64)
        /// Time passes with a ticker: a heartbeat every second.
        case tick(Int64)
        /// The system clock is edited by `offset` ms (in the same boot: the store must not follow).
        case clockEdit(Int64)
        /// Close, let `downtime` pass, open again.
        case reopen(Int64)
        /// The machine reboots after `downtime`; the store opens again.
        case reboot(Int64)
        case expireDue

        static let range = 0...99_999

        init(code: Int) {
            let pick = code / 100
            switch code % 100 {
            case 0..<40:
                self = .call(
                    pick % 2 == 0 ? "w" : "a", quiet: DebouncePropertyTests.quiets[pick / 2 % 3],
                    maxWait: DebouncePropertyTests.maxWaits[pick / 6 % 3])
            case 40..<60: self = .idle(DebouncePropertyTests.waits[pick % DebouncePropertyTests.waits.count])
            case 60..<80: self = .tick(DebouncePropertyTests.waits[pick % DebouncePropertyTests.waits.count])
            case 80..<86: self = .clockEdit([-86_400_000, -3_600_000, 60_000, 3_600_000][pick % 4])
            case 86..<92: self = .reopen([0, 1000, 5000][pick % 3])
            case 92..<95: self = .reboot([1000, 60_000][pick % 2])
            default: self = .expireDue
            }
        }

        var description: String {
            switch self {
            case .call(let key, let quiet, let maxWait): "debounce(\(key), quiet \(quiet), max wait \(maxWait))"
            case .idle(let ms): "idle \(ms) ms"
            case .tick(let ms): "tick \(ms) ms"
            case .clockEdit(let ms): "clock edit \(ms) ms"
            case .reopen(let ms): "reopen after \(ms) ms"
            case .reboot(let ms): "reboot after \(ms) ms"
            case .expireDue: "expireDue"
            }
        }
    }

    /// The reference for one key's current burst, on the item's own timeline.
    struct Burst {
        var generation: Int64
        var deadline: Int64
        var bound: Int64
    }

    /// One sequence against a store of its own.
    final class Run {
        let steps: [Step]
        let fixture: Fixture
        var store: CountdownStore
        var bursts: [String: Burst] = [:]
        /// Every burst that ended: its key, its generation and its last deadline on its timeline.
        var ended: [String: [Int64]] = [:]
        var done: [Step] = []

        init(_ codes: [Int], engine: TestEngine) async throws {
            steps = codes.map(Step.init(code:))
            fixture = try Fixture(engine: engine)
            store = try await fixture.open()
        }

        func fail(_ what: String) -> some Error {
            let trail = done.map(\.description).joined(separator: "; ")
            return CountdownError(.storageFailure, "\(what)\n  after: \(trail)")
        }

        static func timeline(_ time: StoreTime, _ key: String) -> Int64 {
            key == "w" ? time.active + time.gap : time.active
        }

        func sequence() async throws {
            for step in steps {
                try await perform(step)
                done.append(step)
            }
            // Let every burst run out, with a ticker, and check each expired once.
            try await run(store, fixture.clock, for: .seconds(12))
            _ = try await store.expireDue()
            try await verifyExpiries()
            try await store.close()
        }

        func perform(_ step: Step) async throws {
            switch step {
            case .call(let key, let quiet, let maxWait):
                try await call(key, quiet: quiet, maxWait: maxWait)
            case .idle(let ms):
                fixture.clock.advance(by: .milliseconds(ms))
            case .tick(let ms):
                try await run(store, fixture.clock, for: .milliseconds(ms))
            case .clockEdit(let offset):
                fixture.clock.moveSystemClock(by: .milliseconds(offset))
            case .reopen(let downtime):
                try await store.close()
                fixture.clock.advance(by: .milliseconds(downtime))
                store = try await fixture.open()
            case .reboot(let downtime):
                try await store.close()
                fixture.clock.reboot(after: .milliseconds(downtime))
                store = try await fixture.open()
            case .expireDue:
                _ = try await store.expireDue()
            }
        }

        func call(_ key: String, quiet: Int64, maxWait: Int64) async throws {
            let now = Self.timeline(try await store.now(), key)
            let item = try await store.debounce(
                key, quiet: .milliseconds(quiet), maxWait: .milliseconds(maxWait), policy: key == "w" ? .wall : .active)
            let at = Self.timeline(item.computedAt, key)
            guard at == now else { throw fail("the call saw its timeline at \(at), the read before it at \(now)") }
            let expected: Burst
            if let burst = bursts[key], now < burst.deadline {
                let deadline = min(max(burst.deadline, now + quiet), burst.bound)
                guard deadline >= burst.deadline else { throw fail("the reference moved a deadline earlier") }
                expected = Burst(generation: burst.generation, deadline: deadline, bound: burst.bound)
            } else {
                if let burst = bursts[key] { ended[key, default: []].append(burst.generation) }
                let generation = (bursts[key]?.generation ?? 0) + 1
                expected = Burst(generation: generation, deadline: now + quiet, bound: now + maxWait)
            }
            bursts[key] = expected
            let remaining = (item.remaining ?? .zero).milliseconds
            guard item.state == .running, item.generation == expected.generation,
                now + remaining == expected.deadline, item.rule == .debounce
            else {
                throw fail(
                    "debounce(\(key)) at \(now): \(item.state) generation \(item.generation), deadline "
                        + "\(now + remaining) on its timeline; expected generation \(expected.generation), deadline "
                        + "\(expected.deadline) (bound \(expected.bound))")
            }
            if let deadlineAt = item.deadlineAt, let boundAt = item.boundAt, deadlineAt > boundAt {
                throw fail("debounce(\(key)): deadline \(deadlineAt) past its bound \(boundAt)")
            }
            let maxWaitNow = (item.maxWait ?? .zero).milliseconds
            guard expected.bound - expected.deadline <= maxWaitNow, (item.duration ?? .zero).milliseconds <= maxWaitNow
            else { throw fail("debounce(\(key)): its duration \(item.duration ?? .zero) passes its maximum wait") }
        }

        /// Every ended burst, and every burst still open (all have run out by now), expired once.
        func verifyExpiries() async throws {
            for (key, burst) in bursts { ended[key, default: []].append(burst.generation) }
            for key in ["w", "a"] {
                let expiries = try await events(store, key: key, kind: "expired").compactMap(\.generation)
                let wanted = (ended[key] ?? []).sorted()
                guard expiries.sorted() == wanted else {
                    throw fail("expiries of \(key): generations \(expiries.sorted()); expected \(wanted)")
                }
            }
        }
    }

    @Test(
        "Random bursts of calls, time, clock edits and restarts: never past the bound, never earlier, one expiry per burst",
        .shrinking(shrinkFailures), arguments: TestEngine.all)
    func randomBursts(engine: TestEngine) async throws {
        if let replay = ProcessInfo.processInfo.environment["COUNTDOWN_DEBOUNCE_REPLAY"] {
            let input = replay.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            try await Run(input, engine: engine).sequence()
            return
        }
        let sqlite = suiteSize("COUNTDOWN_DEBOUNCE_SEQUENCES", ci: 40)
        let sequences = engine == .sqlite ? sqlite : max(1, sqlite / 4)
        await propertyCheck(count: sequences, input: Gen.int(in: Step.range).array(of: 1...Self.maxSteps)) { codes in
            do {
                try await Run(codes, engine: engine).sequence()
            } catch {
                Issue.record("\(error)\n  input (COUNTDOWN_DEBOUNCE_REPLAY): \(codes.map(String.init).joined(separator: ","))")
                throw error
            }
        }
    }
}
