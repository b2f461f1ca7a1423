import Foundation
import GRDB
import PostgresNIO
import PropertyBased
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite
@testable import CountdownStorePostgres

/// The time model, checked against a reference model: property-based sequences of random
/// operations on a store on a ``VirtualClock``, and the same operations on a small model kept in
/// the test (the three clocks W, A and G, the lease and the suspended flag, and per key the
/// item's policy, duration, elapsed time, state, generation and the instant it reached zero).
///
/// Steps: start a `wall` or `active` countdown (refusing, replacing or keeping an active key) or a
/// stopwatch, pause, resume, cancel, extend and shorten by 1 s, restart, remove, let time pass
/// with no ticker (100 ms to 5 s, no heartbeat) or with one (a heartbeat at least every second),
/// a lone heartbeat, suspend and resume the host, close and reopen the store after some downtime,
/// and `expireDue()`.
///
/// After every step: the store's clocks (`now()`); `countdown(_:)` of every key (state, elapsed,
/// remaining, deadline, generation, and the instant it reached zero, which never moves once
/// set); every filter of `list` walked a page at a time with limits 1 and 2 and in one page, in
/// the model's order; `counts()`, `expiring(within: 2 s)`, `nextDeadline()`, `expired(since:)`;
/// and the `expired` events: one per key and generation, present for every countdown due at the
/// latest write, with the instant it reached zero, the instant it was recorded and its lateness.
/// Every refusal has the code the model expects and changes nothing but the due expiries it
/// records.
///
/// It runs on every engine. Where hosts share the checkpoint (PostgreSQL), the model moves it
/// only on the writes that must move it, saved at the instance's reading (see ``Model/sharedCheckpoint``).
///
/// Size: `COUNTDOWN_MODEL_SEQUENCES` sequences on SQLite (60 in CI) and
/// `COUNTDOWN_POSTGRES_MODEL_SEQUENCES` on PostgreSQL (20 in CI), of up to 30 steps. A failure names the
/// step, the steps before it and the input; `COUNTDOWN_MODEL_REPLAY=<the input's numbers, comma
/// separated>` replays that one input.
@Suite("Time model, property-based")
struct TimeModelPropertyTests {
    static let keys = ["a", "b", "c", "d", "e"]
    static let durations: [Int64] = [300, 1000, 2500, 10_000]
    static let idleSteps: [Int64] = [100, 300, 700, 1000, 1500, 1999, 2000, 2001, 2500, 5000]
    static let tickSteps: [Int64] = [300, 1000, 1700, 2500, 4000]
    static let downtimes: [Int64] = [0, 1000, 5000]
    /// The default lease (2 s) and heartbeat interval (1 s) of ``CountdownStore/Configuration``.
    static let leaseMs: Int64 = 2000
    static let heartbeatMs: Int64 = 1000
    static let maxSteps = 30

    // MARK: - Steps

    /// One step of a sequence, decoded from one generated number and the keys the model holds
    /// at that point (so an input replays exactly).
    enum Step: CustomStringConvertible {
        case start(String, CountdownPolicy, Int64, WhenActive)
        case stopwatch(String, CountdownPolicy, WhenActive)
        case pause(String)
        case resume(String)
        case cancel(String)
        case extend(String)
        case shorten(String)
        case restart(String)
        case remove(String)
        /// Time passes with no ticker: no heartbeat.
        case idle(Int64)
        /// Time passes with a ticker: a heartbeat at least every second.
        case tick(Int64)
        case heartbeat
        case suspendHost
        case resumeHost
        /// Close, let `downtime` pass, open again.
        case reopen(Int64)
        case expireDue

        static let range = 0...99_999

        /// Weighted: the last two digits choose the operation, the others its arguments. An
        /// operation on an existing item picks, four times in five, a key it applies to (a paused
        /// one to resume, an active one to pause, cancel, extend or shorten), if there is one.
        init(code: Int, states: [String: CountdownState]) {
            let kind = code % 100
            let p = code / 100
            let anyKey = TimeModelPropertyTests.keys[p % TimeModelPropertyTests.keys.count]
            func key(_ wanted: Set<CountdownState> = Set(CountdownState.allCases)) -> String {
                let applicable = states.filter { wanted.contains($0.value) }.keys.sorted()
                let candidates = applicable.isEmpty ? states.keys.sorted() : applicable
                return !candidates.isEmpty && (p / 200) % 5 != 0 ? candidates[p % candidates.count] : anyKey
            }
            let policy: CountdownPolicy = (p / 5) % 2 == 0 ? .wall : .active
            let duration = TimeModelPropertyTests.durations[(p / 10) % TimeModelPropertyTests.durations.count]
            let whenActive: WhenActive = [.refuse, .refuse, .replace, .keep][(p / 40) % 4]
            switch kind {
            case 0..<18: self = .start(anyKey, policy, duration, whenActive)
            case 18..<21: self = .stopwatch(anyKey, policy, whenActive)
            case 21..<27: self = .pause(key([.running, .paused]))
            case 27..<33: self = .resume(key([.paused]))
            case 33..<37: self = .cancel(key([.running, .paused]))
            case 37..<41: self = .extend(key([.running, .paused]))
            case 41..<47: self = .shorten(key([.running, .paused]))
            case 47..<51: self = .restart(key())
            case 51..<54: self = .remove(key())
            case 54..<68: self = .idle(TimeModelPropertyTests.idleSteps[p % TimeModelPropertyTests.idleSteps.count])
            case 68..<84: self = .tick(TimeModelPropertyTests.tickSteps[p % TimeModelPropertyTests.tickSteps.count])
            case 84..<88: self = .heartbeat
            case 88..<91: self = .suspendHost
            case 91..<94: self = .resumeHost
            case 94..<97: self = .reopen(TimeModelPropertyTests.downtimes[p % TimeModelPropertyTests.downtimes.count])
            default: self = .expireDue
            }
        }

        var description: String {
            switch self {
            case .start(let key, let policy, let ms, let whenActive):
                "start \(key) \(policy.rawValue) \(ms)ms\(whenActive == .refuse ? "" : " whenActive: .\(whenActive.rawValue)")"
            case .stopwatch(let key, let policy, let whenActive):
                "startStopwatch \(key) \(policy.rawValue)\(whenActive == .refuse ? "" : " whenActive: .\(whenActive.rawValue)")"
            case .pause(let key): "pause \(key)"
            case .resume(let key): "resume \(key)"
            case .cancel(let key): "cancel \(key)"
            case .extend(let key): "extend \(key) by 1s"
            case .shorten(let key): "shorten \(key) by 1s"
            case .restart(let key): "restart \(key)"
            case .remove(let key): "remove \(key)"
            case .idle(let ms): "advance \(ms)ms, no ticker"
            case .tick(let ms): "advance \(ms)ms with a ticker (heartbeat every ≤1s)"
            case .heartbeat: "heartbeat"
            case .suspendHost: "store.enterBackground()"
            case .resumeHost: "store.enterForeground()"
            case .reopen(let ms): "close, \(ms)ms down, reopen"
            case .expireDue: "expireDue()"
            }
        }
    }

    // MARK: - The reference model

    /// One item as the model sees it. Elapsed time is `counted` plus, while running, how far the
    /// item's timeline has moved since `since`.
    struct Item {
        var kind: CountdownKind
        var policy: CountdownPolicy
        var duration: Int64?
        var generation: Int64
        /// As every reader sees it: a countdown that reached zero is expired, recorded or not.
        var state: CountdownState
        var counted: Int64 = 0
        var since: Int64
        var startedAt: Int64
        /// The instant it reached zero; set once, never moved.
        var expiredAt: Int64?
        /// When it was cancelled.
        var endedAt: Int64?
        /// Whether its expiry event has been written.
        var recorded = false
        /// A `wall` countdown never paused, extended or shortened since it (re)started: it must
        /// reach zero at `startedAt + duration` exactly.
        var plainWall: Bool
    }

    struct Generation: Hashable, Comparable, CustomStringConvertible {
        var key: String
        var generation: Int64
        static func < (l: Generation, r: Generation) -> Bool { (l.key, l.generation) < (r.key, r.generation) }
        var description: String { "\(key)#\(generation)" }
    }

    struct Expiry: Hashable, CustomStringConvertible {
        var deadlineAt: Int64
        var firedAt: Int64
        var late: Int64
        var description: String { "deadline \(deadlineAt), fired \(firedAt), late \(late)" }
    }

    /// What a reader should see of one item.
    struct View: Equatable, CustomStringConvertible {
        var key: String
        var kind: CountdownKind
        var policy: CountdownPolicy
        var state: CountdownState
        var generation: Int64
        var duration: Int64?
        var elapsed: Int64
        var remaining: Int64?
        var startedAt: Int64
        var deadlineAt: Int64?
        var expiredAt: Int64?

        init(
            key: String, kind: CountdownKind, policy: CountdownPolicy, state: CountdownState, generation: Int64,
            duration: Int64?, elapsed: Int64, remaining: Int64?, startedAt: Int64, deadlineAt: Int64?, expiredAt: Int64?
        ) {
            self.key = key
            self.kind = kind
            self.policy = policy
            self.state = state
            self.generation = generation
            self.duration = duration
            self.elapsed = elapsed
            self.remaining = remaining
            self.startedAt = startedAt
            self.deadlineAt = deadlineAt
            self.expiredAt = expiredAt
        }

        init(_ c: Countdown) {
            self.init(
                key: c.key, kind: c.kind, policy: c.policy, state: c.state, generation: c.generation,
                duration: c.duration?.milliseconds, elapsed: c.elapsed.milliseconds, remaining: c.remaining?.milliseconds,
                startedAt: c.startedAt.millisecondsSince1970, deadlineAt: c.deadlineAt?.millisecondsSince1970,
                expiredAt: c.expiredAt?.millisecondsSince1970)
        }

        var description: String {
            var text = "\(key) \(kind.rawValue)/\(policy.rawValue) \(state.rawValue) gen \(generation)"
            if let duration { text += " dur \(duration)" }
            text += " elapsed \(elapsed)"
            if let remaining { text += " rem \(remaining)" }
            text += " started \(startedAt)"
            if let deadlineAt { text += " deadlineAt \(deadlineAt)" }
            if let expiredAt { text += " expiredAt \(expiredAt)" }
            return text
        }
    }

    /// The store as the rules describe it.
    struct Model {
        /// W now: the virtual clock (no calibration, so W follows it 1:1).
        var now: Int64
        /// Whether hosts share the checkpoint (an engine whose writers run side by side:
        /// PostgreSQL). Then only the writes that must move it do (a heartbeat, suspend and
        /// resume, giving up the lease), to the instance's reading, floor included (saved as
        /// extrapolated, the timelines went back for the next instance, behind the offsets of the
        /// items this one had started). Otherwise every committed write moves it, to the reading.
        let sharedCheckpoint: Bool
        /// The last checkpoint (the clock row).
        var checkpointW: Int64
        var checkpointA: Int64 = 0
        var checkpointG: Int64 = 0
        var checkpointSuspended = false
        /// The lease row: its holder (a store instance, numbered) and expiry in W.
        var leaseHolder: Int?
        var leaseExpires: Int64 = 0
        /// The open store instance: its number, its host's suspended flag, whether it took the lease.
        var instance = 0
        var hostSuspended = false
        var tookLease = false
        /// The lowest clocks the open instance may hand out (no clock it reads ever goes back).
        var floor: (active: Int64, gap: Int64)?
        /// The clocks at the latest reading, as extrapolated from the checkpoint (before the floor).
        var extrapolatedActive: Int64 = 0
        var extrapolatedGap: Int64 = 0
        /// The clocks at the latest reading.
        var active: Int64 = 0
        var gap: Int64 = 0
        var ticking = false
        var observedAt: Int64
        var items: [String: Item] = [:]
        /// Removed keys and their last generation.
        var retired: [String: Int64] = [:]
        /// The expiry events that must exist, per key and generation.
        var expiries: [Generation: Expiry] = [:]
        /// The model's own inconsistencies (a rule it cannot apply): reported like failures.
        var trouble: [String] = []
        /// What the sequence went through, for the report.
        var seen: [String: Int] = [:]

        init(createdAt: Int64, sharedCheckpoint: Bool) {
            self.sharedCheckpoint = sharedCheckpoint
            now = createdAt
            checkpointW = createdAt
            observedAt = createdAt
        }

        func timeline(_ policy: CountdownPolicy) -> Int64 { policy == .wall ? active + gap : active }

        /// Elapsed time of an item that has been running since `since`, before clamping.
        func runningElapsed(_ item: Item) -> Int64 { item.counted + timeline(item.policy) - item.since }

        func view(_ key: String) -> View? {
            guard let item = items[key] else { return nil }
            let elapsed: Int64
            var deadlineAt: Int64?
            switch item.state {
            case .running:
                elapsed = item.duration.map { min(max(0, runningElapsed(item)), $0) } ?? max(0, runningElapsed(item))
                if let duration = item.duration, item.policy == .wall || ticking {
                    // Placed on W from the checkpoint: where the checkpoint's timeline reaches the
                    // deadline. That is `now + remaining` unless this instance's floor holds the
                    // timeline ahead of the checkpoint's extrapolation (then it is later by as much).
                    let checkpointTimeline = item.policy == .wall ? checkpointA + checkpointG : checkpointA
                    deadlineAt = checkpointW + item.since - item.counted + duration - checkpointTimeline
                }
            case .paused, .cancelled:
                elapsed = item.counted
            case .expired:
                elapsed = item.duration ?? 0
                deadlineAt = item.expiredAt
            }
            return View(
                key: key, kind: item.kind, policy: item.policy, state: item.state, generation: item.generation,
                duration: item.duration, elapsed: elapsed, remaining: item.duration.map { $0 - elapsed },
                startedAt: item.startedAt, deadlineAt: deadlineAt, expiredAt: item.state == .expired ? item.expiredAt : nil)
        }

        // MARK: Time

        /// A reading of the clocks now, as every transaction (read or write) takes one: unless the
        /// host is suspended, the time since the checkpoint is active up to the instant the lease
        /// runs out and background gap after it (suspended, all gap); never below an earlier
        /// reading of this instance. Countdowns that reached zero since the last reading become expired, at the
        /// instant they reached zero.
        mutating func observe() {
            let delta = now - checkpointW
            ticking = !checkpointSuspended && leaseExpires > now
            let counted = checkpointSuspended ? 0 : min(delta, max(0, leaseExpires - checkpointW))
            var a = checkpointA + counted
            var g = checkpointG + delta - counted
            (extrapolatedActive, extrapolatedGap) = (a, g)
            if let floor {
                let total = max(a + g, floor.active + floor.gap)
                if floor.active > a { seen["A held at an earlier reading after the lease ran out", default: 0] += 1 }
                a = max(a, floor.active)
                g = total - a
            }
            let before = (active: active, gap: gap, at: observedAt)
            floor = (a, g)
            active = a
            gap = g
            observedAt = now
            markDue(since: before)
        }

        /// Running countdowns whose remaining time has reached zero become expired, at the instant
        /// their timeline reached the deadline (it moved 1:1 with W since the previous reading, or
        /// not at all, or, for the `active` timeline, 1:1 until the lease ran out and not after).
        mutating func markDue(since before: (active: Int64, gap: Int64, at: Int64)) {
            for key in items.keys.sorted() {
                guard var item = items[key], item.state == .running, let duration = item.duration else { continue }
                let over = runningElapsed(item) - duration
                guard over >= 0 else { continue }
                let moved = timeline(item.policy) - (item.policy == .wall ? before.active + before.gap : before.active)
                let stoppedAtLeaseEnd = item.policy == .active && moved < now - before.at
                if over > 0 && !((moved == now - before.at || stoppedAtLeaseEnd) && over <= moved) {
                    trouble.append(
                        "model: \(key) reached zero \(over)ms ago but its timeline moved \(moved)ms in the last \(now - before.at)ms of W")
                }
                item.state = .expired
                // A timeline that stood still from the lease's end reached it `over` before it stopped.
                item.expiredAt = stoppedAtLeaseEnd ? before.at + moved - over : now - over
                if stoppedAtLeaseEnd && over > 0 { seen["active countdowns reached zero before the lease ran out, read after", default: 0] += 1 }
                seen["\(item.policy.rawValue) countdowns reached zero", default: 0] += 1
                if item.plainWall && item.expiredAt != item.startedAt + duration {
                    trouble.append("model: plain wall countdown \(key) reached zero at \(now - over), not startedAt + duration = \(item.startedAt + duration)")
                }
                items[key] = item
            }
        }

        /// What every write does first: record the expiry of every countdown that reached zero.
        /// Returns their keys.
        mutating func recordDue() -> Set<String> {
            var recorded = Set<String>()
            for key in items.keys.sorted() {
                guard var item = items[key], item.state == .expired, !item.recorded, let expiredAt = item.expiredAt else { continue }
                item.recorded = true
                let late = max(0, runningElapsed(item) - (item.duration ?? 0))
                expiries[Generation(key: key, generation: item.generation)] = Expiry(deadlineAt: expiredAt, firedAt: now, late: late)
                items[key] = item
                recorded.insert(key)
                seen["expiries recorded by a later write", default: 0] += 1
            }
            return recorded
        }

        /// Moves the checkpoint to the latest reading, as a write does (`forced`: a write that
        /// must move it whatever the engine).
        mutating func checkpoint(forced: Bool = false) {
            if sharedCheckpoint {
                guard forced else { return }
                (checkpointW, checkpointA, checkpointG) = (now, active, gap)
            } else {
                (checkpointW, checkpointA, checkpointG) = (now, active, gap)
            }
        }

        /// A write that refuses nothing: read the clocks, record due expiries, checkpoint.
        @discardableResult
        mutating func plainWrite(forced: Bool = false) -> Set<String> {
            observe()
            let due = recordDue()
            checkpoint(forced: forced)
            return due
        }

        mutating func heartbeat() -> Int64? {
            plainWrite(forced: true)
            let free = leaseHolder == nil || leaseExpires <= now
            guard leaseHolder == instance || free else { return nil }
            if leaseHolder != instance && checkpointSuspended != hostSuspended { checkpointSuspended = hostSuspended }
            leaseHolder = instance
            leaseExpires = now + TimeModelPropertyTests.leaseMs
            tookLease = true
            return leaseExpires
        }

        mutating func setSuspended(_ suspended: Bool) {
            hostSuspended = suspended
            plainWrite(forced: true)
            guard checkpointSuspended != suspended else { return }
            checkpointSuspended = suspended
            if !suspended && leaseHolder == instance { leaseExpires = now + TimeModelPropertyTests.leaseMs }
        }

        mutating func close() {
            guard tookLease else { return }  // an instance that never took the lease writes nothing
            plainWrite(forced: true)
            if leaseHolder == instance {
                leaseHolder = nil
                leaseExpires = now
            }
        }

        mutating func reopen() {
            instance += 1
            floor = nil
            hostSuspended = false
            tookLease = false
        }

        // MARK: Operations on one key

        /// Runs a key operation as the store must: records due expiries, then applies the step or
        /// refuses it (a refusal keeps only the expiries and, with them, the checkpoint).
        /// Returns the refusal code, if any, and the keys whose expiry the write recorded.
        mutating func write(_ step: Step) -> (refusal: CountdownError.Code?, due: Set<String>) {
            observe()
            let due = recordDue()
            let refusal = apply(step)
            if refusal == nil || !due.isEmpty { checkpoint() }
            markDue(since: (active, gap, now))  // a restarted countdown of zero duration is due at once
            return (refusal, due)
        }

        private func fresh(
            kind: CountdownKind, policy: CountdownPolicy, duration: Int64?, generation: Int64
        ) -> Item {
            Item(
                kind: kind, policy: policy, duration: duration, generation: generation, state: .running,
                since: timeline(policy), startedAt: now, plainWall: kind == .countdown && policy == .wall)
        }

        private mutating func start(_ key: String, _ kind: CountdownKind, _ policy: CountdownPolicy, _ duration: Int64?, _ whenActive: WhenActive) -> CountdownError.Code? {
            if let existing = items[key], existing.state.isActive {
                switch whenActive {
                case .refuse: return .alreadyActive
                case .keep: return nil
                case .replace: break
                }
            }
            let generation = items[key].map { $0.generation + 1 } ?? retired[key].map { $0 + 1 } ?? 1
            items[key] = fresh(kind: kind, policy: policy, duration: duration, generation: generation)
            return nil
        }

        private mutating func apply(_ step: Step) -> CountdownError.Code? {
            switch step {
            case .start(let key, let policy, let duration, let whenActive):
                return start(key, .countdown, policy, duration, whenActive)
            case .stopwatch(let key, let policy, let whenActive):
                return start(key, .stopwatch, policy, nil, whenActive)
            case .pause(let key):
                guard var item = items[key] else { return .notFound }
                guard item.state == .running else { return .wrongState }
                item.counted = runningElapsed(item)
                item.state = .paused
                item.plainWall = false
                items[key] = item
            case .resume(let key):
                guard var item = items[key] else { return .notFound }
                guard item.state == .paused else { return .wrongState }
                item.since = timeline(item.policy)
                item.state = .running
                items[key] = item
            case .cancel(let key):
                guard var item = items[key] else { return .notFound }
                guard item.state.isActive else { return .wrongState }
                if item.state == .running {
                    let elapsed = max(0, runningElapsed(item))
                    item.counted = item.duration.map { min(elapsed, $0) } ?? elapsed
                }
                item.state = .cancelled
                item.endedAt = now
                items[key] = item
            case .extend(let key):
                guard var item = items[key] else { return .notFound }
                guard item.kind == .countdown, item.state.isActive, let duration = item.duration else { return .wrongState }
                item.duration = duration + 1000
                item.generation += 1
                item.plainWall = false
                items[key] = item
            case .shorten(let key):
                guard var item = items[key] else { return .notFound }
                guard item.kind == .countdown, item.state.isActive, let duration = item.duration else { return .wrongState }
                let elapsed = item.state == .running ? max(0, runningElapsed(item)) : item.counted
                item.generation += 1
                item.plainWall = false
                if duration - 1000 <= elapsed {
                    seen["shortened past zero", default: 0] += 1
                    // Past zero: it is over now, having run exactly what it ran.
                    item.duration = elapsed
                    item.counted = elapsed
                    item.state = .expired
                    item.expiredAt = now
                    item.recorded = true
                    expiries[Generation(key: key, generation: item.generation)] = Expiry(deadlineAt: now, firedAt: now, late: 0)
                } else {
                    item.duration = duration - 1000
                }
                items[key] = item
            case .restart(let key):
                guard let item = items[key] else { return .notFound }
                items[key] = fresh(kind: item.kind, policy: item.policy, duration: item.duration, generation: item.generation + 1)
            case .remove(let key):
                guard let item = items[key] else { return .notFound }
                retired[key] = max(retired[key] ?? 0, item.generation)
                items[key] = nil
            case .idle, .tick, .heartbeat, .suspendHost, .resumeHost, .reopen, .expireDue:
                break
            }
            return nil
        }

        // MARK: Orders

        func remaining(_ key: String) -> Int64 { view(key)?.remaining ?? 0 }

        /// Countdowns in `states` by remaining time (ties by key), then stopwatches by key.
        func activeOrder(_ states: Set<CountdownState>) -> [String] {
            let chosen = items.filter { states.contains($0.value.state) }
            let countdowns = chosen.filter { $0.value.kind == .countdown }.keys
                .sorted { (remaining($0), $0) < (remaining($1), $1) }
            let stopwatches = chosen.filter { $0.value.kind == .stopwatch }.keys.sorted()
            return countdowns + stopwatches
        }

        func endInstant(_ item: Item) -> Int64 { (item.state == .expired ? item.expiredAt : item.endedAt) ?? 0 }

        /// Ended items in `states`, most recent end first (ties: key descending), from `since` on.
        func endedOrder(_ states: Set<CountdownState>, since: Int64? = nil) -> [String] {
            items.filter { states.contains($0.value.state) && endInstant($0.value) >= (since ?? .min) }
                .map { (end: endInstant($0.value), key: $0.key) }
                .sorted { ($0.end, $0.key) > ($1.end, $1.key) }
                .map(\.key)
        }

        func order(_ filter: StateFilter) -> [String] {
            switch filter {
            case .active: activeOrder([.running, .paused])
            case .running: activeOrder([.running])
            case .paused: activeOrder([.paused])
            case .expired: endedOrder([.expired])
            case .cancelled: endedOrder([.cancelled])
            case .all: activeOrder([.running, .paused]) + endedOrder([.expired, .cancelled])
            }
        }

        /// Running countdowns (not at zero), soonest first.
        var runningCountdowns: [String] {
            items.filter { $0.value.state == .running && $0.value.kind == .countdown }.keys
                .sorted { (remaining($0), $0) < (remaining($1), $1) }
        }
    }

    // MARK: - The database, for refusals

    struct EventLine: Equatable {
        var kind: String
        var key: String?
        var text: String
    }

    /// Every row the store keeps, for proving that a refusal changed nothing but due expiries.
    struct Tables: Equatable {
        var countdowns: [String: String] = [:]
        var events: [EventLine] = []
        var clock: [String] = []
        var others: [String] = []
    }

    static func tables(_ store: CountdownStore) async throws -> Tables {
        if let engine = store.engine as? PostgresEngine, let schema = engine.schema {
            return try await postgresTables(schema: schema)
        }
        return try await store.grdb.read { db in
            var tables = Tables()
            for row in try Row.fetchAll(db, sql: "SELECT * FROM countdowns") {
                tables.countdowns[row["key"]] = "\(row)"
            }
            for row in try Row.fetchAll(db, sql: "SELECT * FROM countdown_events ORDER BY id") {
                tables.events.append(EventLine(kind: row["kind"], key: row["key"], text: "\(row)"))
            }
            tables.clock = try Row.fetchAll(db, sql: "SELECT * FROM countdown_clock").map { "\($0)" }
            for table in ["countdown_lease", "countdown_retired_keys", "countdown_consumers"] {
                tables.others += try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY rowid").map { "\(table): \($0)" }
            }
            return tables
        }
    }

    /// ``tables(_:)`` of a store on PostgreSQL, in `schema`: each row as JSON text.
    static func postgresTables(schema: String) async throws -> Tables {
        let client = try PostgresFixtures.client()
        func rows(_ sql: String) async throws -> [(String?, String?, String)] {
            var found: [(String?, String?, String)] = []
            for try await row in try await client.query(PostgresQuery(unsafeSQL: sql)).decode((String?, String?, String).self) {
                found.append(row)
            }
            return found
        }
        var tables = Tables()
        for (key, _, text) in try await rows("SELECT key, NULL::text, row_to_json(t)::text FROM \"\(schema)\".countdowns AS t") {
            tables.countdowns[key ?? ""] = text
        }
        for (kind, key, text) in try await rows(
            "SELECT kind, key, row_to_json(t)::text FROM \"\(schema)\".countdown_events AS t ORDER BY id")
        {
            tables.events.append(EventLine(kind: kind ?? "", key: key, text: text))
        }
        tables.clock = try await rows("SELECT NULL::text, NULL::text, row_to_json(t)::text FROM \"\(schema)\".countdown_clock AS t").map(\.2)
        for table in ["countdown_lease", "countdown_retired_keys", "countdown_consumers"] {
            tables.others += try await rows(
                "SELECT NULL::text, NULL::text, row_to_json(t)::text FROM \"\(schema)\".\(table) AS t ORDER BY 3"
            ).map { "\(table): \($0.2)" }
        }
        return tables
    }

    // MARK: - One sequence

    /// Totals over the whole run, for the report.
    struct Totals {
        var sequences = 0
        var steps = 0
        var refusals = 0
        var pagesWalked = 0
        var seen: [String: Int] = [:]

        mutating func add(_ other: Totals) {
            sequences += other.sequences
            steps += other.steps
            refusals += other.refusals
            pagesWalked += other.pagesWalked
            seen.merge(other.seen, uniquingKeysWith: +)
        }

        var description: String {
            "\(sequences) sequences, \(steps) steps, \(refusals) refusals, \(pagesWalked) pages walked; "
                + seen.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
        }
    }

    /// Runs one input against a fresh store and the model, checking after every step. Stops at the
    /// first step that disagrees (the model would be out of step with the store after it).
    final class Run {
        let input: [Int]
        /// The steps decoded so far.
        var steps: [Step] = []
        let fixture: Fixture
        var store: CountdownStore
        var model: Model
        var index = 0
        var failed = false
        var totals = Totals()

        init(_ input: [Int], engine: TestEngine) async throws {
            self.input = input
            fixture = try Fixture(engine: engine)
            store = try await fixture.open()
            model = Model(createdAt: fixture.clock.systemMilliseconds, sharedCheckpoint: store.capabilities.writersRunSideBySide)
        }

        /// Where a failure happened and how to replay it.
        var context: String {
            let done = steps.prefix(index + 1).enumerated().map { "  \($0.offset + 1). \($0.element)" }.joined(separator: "\n")
            return """
                at step \(index + 1) of \(input.count): \(steps[index])
                W = \(model.now) (created at \(model.now - (model.active + model.gap))), model A = \(model.active), G = \(model.gap), lease until \(model.leaseExpires), suspended \(model.checkpointSuspended)
                steps so far:
                \(done)
                input: \(input)
                replay: COUNTDOWN_MODEL_REPLAY=\(input.map(String.init).joined(separator: ","))
                """
        }

        /// What disagreed at this step; reported together, once, with the context.
        var problems: [String] = []

        func check(_ condition: Bool, _ what: @autoclosure () -> String) {
            guard !condition else { return }
            failed = true
            problems.append(what())
        }

        func report() {
            guard !problems.isEmpty else { return }
            Issue.record("\(problems.joined(separator: "\n"))\n\(context)")
            problems = []
        }

        func sequence() async {
            do {
                for position in input.indices {
                    index = position
                    steps.append(Step(code: input[position], states: model.items.mapValues(\.state)))
                    try await perform(steps[position])
                    totals.steps += 1
                    if !failed { try await verify() }
                    if !model.trouble.isEmpty {
                        check(false, model.trouble.joined(separator: "\n"))
                        model.trouble = []
                    }
                    if failed { break }
                }
                try await store.close()
            } catch {
                check(false, "unexpected error: \(error)")
            }
            report()
            totals.sequences += 1
            totals.seen.merge(model.seen, uniquingKeysWith: +)
        }

        // MARK: Steps

        func perform(_ step: Step) async throws {
            let clock = fixture.clock
            switch step {
            case .idle(let ms):
                clock.advance(by: .milliseconds(ms))
                model.now += ms
            case .tick(let ms):
                var left = ms
                while left > 0 {
                    let next = min(TimeModelPropertyTests.heartbeatMs, left)
                    clock.advance(by: .milliseconds(next))
                    model.now += next
                    left -= next
                    try await heartbeat()
                }
            case .heartbeat:
                try await heartbeat()
            case .suspendHost:
                model.setSuspended(true)
                try await store.enterBackground()
            case .resumeHost:
                model.setSuspended(false)
                try await store.enterForeground()
            case .expireDue:
                let due = model.plainWrite()
                let expired = try await store.expireDue()
                check(Set(expired.map(\.key)) == due, "expireDue() returned \(expired.map(\.key).sorted()), the model expected \(due.sorted())")
                check(expired.allSatisfy { $0.state == .expired }, "expireDue() returned items not expired: \(expired.map(View.init))")
            case .reopen(let downtime):
                model.close()
                try await store.close()
                clock.advance(by: .milliseconds(downtime))
                model.now += downtime
                model.reopen()
                store = try await fixture.open()
            case .start, .stopwatch, .pause, .resume, .cancel, .extend, .shorten, .restart, .remove:
                try await keyOperation(step)
            }
        }

        func heartbeat() async throws {
            let until = model.heartbeat()
            let status = try await store.heartbeat()
            if let until {
                check(status == .held(until: Date(millisecondsSince1970: until)), "heartbeat: \(status), the model expected the lease held until \(until)")
            } else if case .held = status {
                check(false, "heartbeat: \(status), the model expected the lease held elsewhere")
            }
        }

        func keyOperation(_ step: Step) async throws {
            let before = try await TimeModelPropertyTests.tables(store)
            let expected = model.write(step)
            var refusal: CountdownError?
            do {
                switch step {
                case .start(let key, let policy, let ms, let whenActive):
                    try await store.start(key, duration: .milliseconds(ms), policy: policy, whenActive: whenActive)
                case .stopwatch(let key, let policy, let whenActive):
                    try await store.startStopwatch(key, policy: policy, whenActive: whenActive)
                case .pause(let key): try await store.pause(key)
                case .resume(let key): try await store.resume(key)
                case .cancel(let key): try await store.cancel(key)
                case .extend(let key): try await store.extend(key, by: .seconds(1))
                case .shorten(let key): try await store.shorten(key, by: .seconds(1))
                case .restart(let key): try await store.restart(key)
                case .remove(let key): try await store.remove(key)
                default: break
                }
            } catch {
                refusal = error  // every operation throws CountdownError only
            }
            let verb = String(step.description.prefix { $0 != " " })
            model.seen[expected.refusal.map { "\(verb) refused: \($0)" } ?? "\(verb) done", default: 0] += 1
            switch (expected.refusal, refusal) {
            case (nil, nil):
                break
            case (let code?, nil):
                check(false, "\(step) succeeded; the model expected a refusal with code \(code)")
            case (nil, let error?):
                check(false, "\(step) was refused (\(error.code): \(error.message)); the model expected it to succeed")
            case (let code?, let error?):
                totals.refusals += 1
                check(error.code == code, "\(step) was refused with \(error.code) (\(error.message)); the model expected \(code)")
                try await checkRefusalChangedNothing(before, due: expected.due)
            }
        }

        /// A refused write keeps the expiries it recorded (and the checkpoint it moved to record
        /// them), and nothing else.
        func checkRefusalChangedNothing(_ before: Tables, due: Set<String>) async throws {
            let after = try await TimeModelPropertyTests.tables(store)
            guard !due.isEmpty else {
                check(after == before, "a refusal with nothing due changed the database:\nbefore \(before)\nafter \(after)")
                return
            }
            check(after.others == before.others, "a refusal changed the lease or retired keys:\nbefore \(before.others)\nafter \(after.others)")
            check(Set(after.countdowns.keys) == Set(before.countdowns.keys), "a refusal added or removed items")
            for (key, row) in before.countdowns where !due.contains(key) {
                check(after.countdowns[key] == row, "a refusal changed \(key), which was not due:\nbefore \(row)\nafter \(after.countdowns[key] ?? "nil")")
            }
            check(Array(after.events.prefix(before.events.count)) == before.events, "a refusal changed earlier events")
            let added = after.events.dropFirst(before.events.count)
            check(
                added.count == due.count && added.allSatisfy { $0.kind == "expired" && due.contains($0.key ?? "") },
                "a refusal recording \(due.sorted()) added events \(added.map(\.text))")
        }

        // MARK: Checks

        func verify() async throws {
            model.observe()  // the reads below all read the clocks at this instant
            let now = try await store.now()
            check(
                now == StoreTime(wall: model.now, active: model.active, gap: model.gap),
                "now() = \(now), the model expected W \(model.now), A \(model.active), G \(model.gap)")

            for key in TimeModelPropertyTests.keys {
                let got = try await store.countdown(key).map(View.init)
                let expected = model.view(key)
                check(got == expected, "countdown(\(key)):\n  store \(got.map(String.init(describing:)) ?? "nil")\n  model \(expected.map(String.init(describing:)) ?? "nil")")
            }

            for filter in StateFilter.allCases {
                let expected = model.order(filter).compactMap { model.view($0) }
                let whole = try await store.list(filter, limit: 100, after: nil)
                check(whole.next == nil, "list(.\(filter.rawValue), limit: 100) has a next page")
                check(whole.items.map(View.init) == expected, "list(.\(filter.rawValue)):\n  store \(whole.items.map(View.init))\n  model \(expected)")
                for limit in [1, 2] {
                    let walked = try await walk(filter, limit: limit)
                    check(
                        walked.map(View.init) == expected,
                        "list(.\(filter.rawValue)) walked with limit \(limit):\n  store \(walked.map(View.init))\n  model \(expected)")
                }
            }

            let counts = try await store.counts()
            for state in CountdownState.allCases {
                let expected = model.items.values.filter { $0.state == state }.count
                check(counts.count(state) == expected, "counts(): \(counts.count(state)) \(state.rawValue), the model expected \(expected)")
            }
            check(counts.total == model.items.count, "counts(): \(counts.total) in all, the model expected \(model.items.count)")

            let expiring = try await store.expiring(within: .seconds(2))
            let soon = model.runningCountdowns.filter { model.remaining($0) <= 2000 }
            check(
                expiring.map(\.key) == soon && expiring.allSatisfy { $0.state == .running },
                "expiring(within: 2s): \(expiring.map(View.init)), the model expected \(soon)")

            let next = try await store.nextDeadline()
            check(next?.key == model.runningCountdowns.first, "nextDeadline(): \(next.map(View.init).map(String.init(describing:)) ?? "nil"), the model expected \(model.runningCountdowns.first ?? "nil")")

            let instants = model.items.values.compactMap { $0.state == .expired ? $0.expiredAt : nil }.sorted()
            var sinces: [Int64?] = [nil, model.now - 1500]
            if !instants.isEmpty { sinces.append(instants[instants.count / 2]) }
            for since in sinces {
                let expired = try await store.expired(since: since.map(Date.init(millisecondsSince1970:)))
                let expected = model.endedOrder([.expired], since: since).compactMap { model.view($0) }
                check(expired.map(View.init) == expected, "expired(since: \(since.map(String.init) ?? "nil")):\n  store \(expired.map(View.init))\n  model \(expected)")
            }

            var recorded: [Generation: Expiry] = [:]
            for row in try await events(store, kind: "expired") {
                let id = Generation(key: row.key ?? "", generation: row.generation ?? 0)
                check(recorded[id] == nil, "two expired events for \(id)")
                recorded[id] = Expiry(deadlineAt: row.deadlineAtMs ?? -1, firedAt: row.firedAtMs ?? -1, late: row.lateMs ?? -1)
            }
            if recorded != model.expiries {
                let ids = Set(recorded.keys).union(model.expiries.keys).sorted()
                let lines = ids.filter { recorded[$0] != model.expiries[$0] }.map {
                    "  \($0): store \(recorded[$0].map(String.init(describing:)) ?? "none"), model \(model.expiries[$0].map(String.init(describing:)) ?? "none")"
                }
                check(false, "expired events disagree with the model:\n\(lines.joined(separator: "\n"))")
            }
        }

        /// Every page of `list(filter)` at `limit` items a page.
        func walk(_ filter: StateFilter, limit: Int) async throws -> [Countdown] {
            var items: [Countdown] = []
            var cursor: ListCursor?
            var pages = 0
            repeat {
                let page = try await store.list(filter, limit: limit, after: cursor)
                check(page.items.count <= limit, "list(.\(filter.rawValue), limit: \(limit)) returned \(page.items.count) items")
                items += page.items
                cursor = page.next
                pages += 1
            } while cursor != nil && pages <= 3 * TimeModelPropertyTests.keys.count
            check(cursor == nil, "list(.\(filter.rawValue), limit: \(limit)) did not end after \(pages) pages")
            totals.pagesWalked += pages
            return items
        }
    }

    // MARK: - The tests

    @Test(
        "Random sequences of operations, suspends, restarts and time with or without a ticker agree with the model",
        .shrinking(shrinkFailures), arguments: TestEngine.all)
    func randomSequences(engine: TestEngine) async throws {
        let started = ContinuousClock.now
        var totals = Totals()
        if let replay = ProcessInfo.processInfo.environment["COUNTDOWN_MODEL_REPLAY"] {
            let input = replay.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            let run = try await Run(input, engine: engine)
            await run.sequence()
            totals.add(run.totals)
        } else {
            // On PostgreSQL each step is many round trips: a count of its own.
            let sequences =
                engine == .sqlite
                ? suiteSize("COUNTDOWN_MODEL_SEQUENCES", ci: 60) : suiteSize("COUNTDOWN_POSTGRES_MODEL_SEQUENCES", ci: 20)
            let input = Gen.int(in: Step.range).array(of: 1...Self.maxSteps)
            await propertyCheck(count: sequences, input: input) { codes in
                let run = try await Run(codes, engine: engine)
                await run.sequence()
                totals.add(run.totals)
            }
        }
        let elapsed = ContinuousClock.now - started
        print("time-model suite (\(engine)): \(totals.description); in \(elapsed)")
    }

    /// A sequence the random runs found on PostgreSQL: the lease runs out while the instance
    /// holds its active time at an earlier reading, an active countdown starts, and the store is
    /// closed and reopened. The reopened instance must list it by its remaining time and count it
    /// as expiring soon: its timelines may not go back behind the countdown's offsets.
    static let floorAcrossInstances = [
        53056, 98461, 64406, 69872, 48075, 75838, 30560, 87359, 92247, 94113, 28803, 86834, 6672, 95309,
        86821, 4907, 82296, 72240, 54714, 63074, 4073, 50671, 89157, 71294, 44122, 74428, 78276, 58619,
    ]

    @Test("Regression: a countdown started after the lease ran out keeps its place and its expiry once the store is reopened", arguments: TestEngine.all)
    func floorAcrossInstances(engine: TestEngine) async throws {
        let run = try await Run(Self.floorAcrossInstances, engine: engine)
        await run.sequence()
        #expect(!run.failed, "the sequence failed: see the issue recorded above")
    }

    @Test("A wall countdown reaches zero at startedAt + duration for every reader, before and after its expiry is recorded", arguments: TestEngine.all)
    func wallExpiryInstant(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let started = try await store.start("a", duration: .milliseconds(2500))
        let zero = started.startedAt.millisecondsSince1970 + 2500
        try await run(store, fixture.clock, for: .seconds(2))
        fixture.clock.advance(by: .milliseconds(700))
        for _ in 0..<2 {
            let item = try #require(try await store.countdown("a"))
            #expect(item.state == .expired && item.remaining == .zero && item.expiredAt?.millisecondsSince1970 == zero)
            #expect(try await store.list(.expired).map { $0.expiredAt?.millisecondsSince1970 } == [zero])
            #expect(try await store.nextDeadline() == nil)
            #expect(try await store.expiring(within: .seconds(2)).isEmpty)
            fixture.clock.advance(by: .seconds(3))
        }
        // Refused (it is over), but the refusal records the expiry.
        await expectError(.wrongState) { try await store.pause("a") }
        let recorded = try await events(store, key: "a", kind: "expired")
        #expect(recorded.count == 1 && recorded.first?.deadlineAtMs == zero && recorded.first?.generation == 1)
        #expect(try await store.countdown("a")?.expiredAt?.millisecondsSince1970 == zero)
        try await store.expireDue()
        #expect(try await events(store, key: "a", kind: "expired").count == 1)
        try await store.close()
    }

    @Test("An active countdown keeps the instant it reached zero after the lease runs out, in every reader, its event and every page", arguments: TestEngine.all)
    func activeExpiryInstantAfterLeaseLapses(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.heartbeat()  // the lease: live for 2 s
        let t0 = try await store.now().wall
        try await store.start("a", duration: .milliseconds(600), policy: .active)
        try await store.start("b", duration: .milliseconds(300), policy: .active)
        fixture.clock.advance(by: .seconds(1))  // no heartbeat, but the lease is live: A counts
        for key in ["a", "b"] {
            #expect(try await store.countdown(key)?.expiredAt?.millisecondsSince1970 == t0 + (key == "a" ? 600 : 300))
        }
        fixture.clock.advance(by: .milliseconds(1500))  // the lease has run out; nothing was written
        for key in ["a", "b"] {
            let item = try #require(try await store.countdown(key))
            #expect(item.state == .expired && item.expiredAt?.millisecondsSince1970 == t0 + (key == "a" ? 600 : 300), "\(key): \(item)")
        }
        #expect(try await store.list(.expired, limit: 100, after: nil).items.map(\.key) == ["a", "b"])
        var walked: [String] = []
        var cursor: ListCursor?
        repeat {
            let page = try await store.list(.expired, limit: 1, after: cursor)
            walked += page.items.map(\.key)
            cursor = page.next
        } while cursor != nil && walked.count < 10
        #expect(walked == ["a", "b"], "walked one item a page")
        try await store.expireDue()
        #expect(try await events(store, kind: "expired").map(\.deadlineAtMs) == [t0 + 300, t0 + 600])
        #expect(try await store.countdown("a")?.expiredAt?.millisecondsSince1970 == t0 + 600)
        try await store.close()
    }

    @Test("An active countdown shortened to zero and restarted with no ticker reached zero at the restart, for good", arguments: TestEngine.all)
    func zeroDurationRestartWithoutTicker(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.start("a", duration: .milliseconds(300), policy: .active)
        let shortened = try await store.shorten("a", by: .seconds(1))  // past zero: over at once, duration 0
        #expect(shortened.state == .expired && shortened.duration == .zero)
        let restarted = try await store.restart("a")  // the same duration, 0: it reaches zero as it starts
        let zero = restarted.startedAt.millisecondsSince1970
        #expect(restarted.state == .expired && restarted.expiredAt?.millisecondsSince1970 == zero)
        fixture.clock.advance(by: .seconds(1))
        #expect(try await store.countdown("a")?.expiredAt?.millisecondsSince1970 == zero)
        try await store.expireDue()
        // Generation 2 expired when shortened, generation 3 as it restarted: both at the same instant.
        let recorded = try await events(store, key: "a", kind: "expired").map { "gen \($0.generation ?? 0) at \($0.deadlineAtMs ?? 0)" }
        #expect(recorded == ["gen 2 at \(zero)", "gen 3 at \(zero)"])
        #expect(try await store.countdown("a")?.expiredAt?.millisecondsSince1970 == zero)
        try await store.close()
    }

    @Test("Walking list pages with limit 1 gives the one-page order in every filter", arguments: TestEngine.all)
    func pagedOrder(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        try await store.start("a", duration: .seconds(10))
        try await store.start("b", duration: .seconds(10), policy: .active)  // the same remaining: by key
        try await store.start("c", duration: .milliseconds(300))
        try await store.startStopwatch("d")
        try await store.start("e", duration: .seconds(9))
        try await store.pause("e")  // paused with the remaining a and b will have: 9 s
        try await run(store, fixture.clock, for: .seconds(1))
        try await store.start("f", duration: .milliseconds(300))
        try await store.cancel("f")
        for filter in StateFilter.allCases {
            let whole = try await store.list(filter, limit: 100, after: nil).items.map(\.key)
            var walked: [String] = []
            var cursor: ListCursor?
            repeat {
                let page = try await store.list(filter, limit: 1, after: cursor)
                walked += page.items.map(\.key)
                cursor = page.next
            } while cursor != nil && walked.count < 20
            #expect(walked == whole, "\(filter)")
        }
        #expect(try await store.list(.all, limit: 100).map(\.key) == ["a", "b", "e", "d", "f", "c"])
        try await store.close()
    }
}
