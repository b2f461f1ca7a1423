import Foundation
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

/// Group commit: writes of single items that arrive while another write is under way commit
/// together, each in a savepoint, each caller with exactly the outcome it would have had alone.
///
/// Serialized: a gate holds a write's transaction open on the engine's thread, which for SQLite is
/// one of the few threads of Swift's cooperative pool.
@Suite("Group commit", .serialized)
struct GroupCommitTests {
    /// A gate a write's body waits at (on the engine's thread), so that the others queue behind it.
    final class Gate: @unchecked Sendable {
        // `@unchecked Sendable`: a semaphore and a lock-guarded count.
        private let semaphore = DispatchSemaphore(value: 0)
        private let entered = Locked(0)
        private let expected: Int
        init(_ expected: Int = 1) { self.expected = expected }
        func wait() {
            entered.withLock { $0 += 1 }
            _ = semaphore.wait(timeout: .now() + 60)
        }
        var isEntered: Bool { entered.withLock { $0 } >= expected }
        func open() { for _ in 0..<expected { semaphore.signal() } }
    }

    /// Holds every group the store may run side by side (one on SQLite) in its transaction until
    /// the gate opens, so that every write called meanwhile queues.
    static func holdEveryGroup(_ store: CountdownStore) async throws -> (Gate, [Task<Int, any Error>]) {
        let gate = Gate(store.capabilities.concurrentWriteGroups)
        let held = (0..<store.capabilities.concurrentWriteGroups).map { _ in
            Task {
                try await store.groupedWriting(.start) { _, _ in
                    gate.wait()
                    return 1
                }
            }
        }
        try await until("every group under way entering its transaction") { gate.isEntered }
        return (gate, held)
    }

    /// A first write holds the store; the one queued behind it leads the next group (of the
    /// store's commit queue, on SQLite), whose transaction is then held open at `inner` in turn.
    /// Returns once that transaction is under way.
    static func holdSecondGroup(_ store: CountdownStore) async throws -> (
        inner: Gate, leading: Task<Int, any Error>, held: [Task<Int, any Error>]
    ) {
        let (first, held) = try await holdEveryGroup(store)
        let inner = Gate()
        let leading = Task {
            try await store.groupedWriting(.start) { _, _ in
                inner.wait(); return 1
            }
        }
        try await until("the second write queued") { store.groups.waitingCount == 1 }
        first.open()
        try await until("the second group's transaction under way") { inner.isEntered }
        return (inner, leading, held)
    }

    /// Waits (at most 30 s) until `condition` holds.
    static func until(_ what: String, _ condition: () -> Bool) async throws {
        let end = ContinuousClock.now + .seconds(30)
        while !condition() {
            guard ContinuousClock.now < end else { throw TestFailure("\(what) did not happen within 30 s") }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    struct TestFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// What one caller asked for in the group, and what it must get.
    enum Call: Sendable {
        case start(String)
        case startTaken(String)
        case pauseUnknown(String)
        case pause(String)
        case cancelCancelled(String)
    }

    @Test("Writes queued behind one under way commit in one group; each refusal fails its caller alone and leaves nothing", arguments: TestEngine.all)
    func queuedWritesCommitTogether(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.start("taken-1", duration: .seconds(60))
        try await store.start("taken-2", duration: .seconds(60))
        try await store.start("running", duration: .seconds(60))
        try await store.start("gone", duration: .seconds(60))
        try await store.cancel("gone")
        let eventsBefore = try await events(store).count
        let statsBefore = store.groups.stats

        // The groups under way hold their transactions open until every other caller has queued.
        let (gate, held) = try await Self.holdEveryGroup(store)
        var calls: [Call] = (0..<12).map { .start("new-\($0)") }
        calls.insert(.startTaken("taken-1"), at: 3)
        calls.insert(.pauseUnknown("nobody"), at: 6)
        calls.insert(.pause("running"), at: 9)
        calls.insert(.startTaken("taken-2"), at: 11)
        calls.insert(.cancelCancelled("gone"), at: 14)
        let outcomes = try await withThrowingTaskGroup(of: (Int, Result<Countdown, CountdownError>).self) { group in
            for (index, call) in calls.enumerated() {
                group.addTask {
                    do throws(CountdownError) {
                        switch call {
                        case .start(let key), .startTaken(let key):
                            return (index, .success(try await store.start(key, duration: .seconds(300), group: "g")))
                        case .pauseUnknown(let key), .pause(let key):
                            return (index, .success(try await store.pause(key)))
                        case .cancelCancelled(let key):
                            return (index, .success(try await store.cancel(key)))
                        }
                    } catch {
                        return (index, .failure(error))
                    }
                }
            }
            try await Self.until("every caller queued") { store.groups.waitingCount == calls.count }
            gate.open()
            var outcomes: [Int: Result<Countdown, CountdownError>] = [:]
            for try await (index, outcome) in group { outcomes[index] = outcome }
            return outcomes
        }
        for task in held { #expect(try await task.value == 1) }

        // One group, unless the group's time bound (slow statements: a debug build, a server
        // far away) left the rest for the next: in any case far fewer transactions than writes.
        let stats = store.groups.stats
        let heldCount = held.count
        #expect(stats.writes - statsBefore.writes == calls.count + heldCount)
        #expect(stats.largest > 1 && stats.groups - statsBefore.groups < heldCount + calls.count / 2, "\(stats)")
        if engine == .sqlite { #expect(stats.largest == calls.count, "\(stats)") }

        for (index, call) in calls.enumerated() {
            let outcome = try #require(outcomes[index])
            switch call {
            case .start(let key):
                let started = try outcome.get()
                #expect(started.key == key && started.state == .running && started.generation == 1)
                #expect(try await store.countdown(key) == started, "what the caller got is what was stored")
            case .startTaken(let key):
                #expect(throws: CountdownError.self) { try outcome.get() }
                if case .failure(let error) = outcome { #expect(error.code == .alreadyActive, "\(key): \(error)") }
                #expect(try await store.countdown(key)?.duration == .seconds(60), "the active one is untouched")
            case .pauseUnknown:
                if case .failure(let error) = outcome { #expect(error.code == .notFound) } else { Issue.record("pausing an unknown key succeeded") }
            case .pause(let key):
                #expect(try outcome.get().state == .paused)
                #expect(try await store.countdown(key)?.state == .paused)
            case .cancelCancelled:
                if case .failure(let error) = outcome { #expect(error.code == .wrongState) } else { Issue.record("cancelling twice succeeded") }
            }
        }
        // One event per write that succeeded, none of the refusals.
        let events = try await events(store).dropFirst(eventsBefore)
        #expect(events.map(\.kind).sorted() == (Array(repeating: "started", count: 12) + ["paused"]).sorted())
        #expect(Set(events.compactMap(\.key)) == Set((0..<12).map { "new-\($0)" } + ["running"]))
        // In the order of the writes: the new keys' events (appended together) in the order their
        // items went in; in one group, the pause's after them, since its body ran after.
        let newKeys = (0..<12).map { "new-\($0)" }
        let inserted = try await store.engine.read { tx in
            try newKeys.map { key in (key, try tx.item(key: key)?.id ?? -1) }
        }
        let startedKeys = events.filter { $0.kind == "started" }.compactMap(\.key)
        #expect(startedKeys == inserted.sorted { $0.1 < $1.1 }.map(\.0), "\(events)")
        if stats.groups - statsBefore.groups == heldCount + 1 { #expect(events.last?.kind == "paused", "\(events)") }
        try await store.close()
    }

    @Test(
        "On SQLite, a group's transaction takes in the writes that come while it runs, each at the instant it would have had alone"
    )
    func lateWritesJoinAtTheirOwnInstant() async throws {
        let fixture = try Fixture()
        let store = try await fixture.openTicking()
        try await store.start("due", duration: .milliseconds(5))
        let before = store.groups.stats
        // The transaction is held open below for as long as the machine takes to queue a write.
        store.groups.timeBound = .seconds(60)

        // A first write holds the store; the one queued behind it leads the next group, whose
        // transaction is then held open in turn.
        let (inner, leading, held) = try await Self.holdSecondGroup(store)
        let readAtBegin = fixture.clock.bootMilliseconds

        // While it runs, the clocks move past the deadline of "due", and a start comes.
        fixture.clock.advance(by: .milliseconds(7))
        let late = Task { try await store.start("late", duration: .seconds(60)) }
        try await Self.until("the late start queued") { store.groups.waitingCount == 1 }
        inner.open()
        let started = try await late.value
        #expect(try await leading.value == 1)
        for task in held { #expect(try await task.value == 1) }
        let stats = store.groups.stats
        #expect(stats.groups - before.groups == 2, "the late start went into the group under way: \(stats)")
        #expect(stats.largest == 2, "\(stats)")

        // Its instants are those of a start alone at the same reading of the clocks, 7 ms after
        // the group's transaction read them; and "due" was recorded first, at its deadline.
        let alone = try await store.start("alone", duration: .seconds(60))
        #expect(fixture.clock.bootMilliseconds == readAtBegin + 7)
        #expect(started.startedAt == alone.startedAt && started.deadlineAt == alone.deadlineAt)
        #expect(started.remaining == .seconds(60))
        let due = try #require(try await store.countdown("due"))
        #expect(due.state == .expired)
        #expect(due.expiredAt == due.deadlineAt)
        let kinds = try await events(store).map { "\($0.kind) \($0.key ?? "")" }
        let expiry = try #require(kinds.firstIndex(of: "expired due"))
        let lateStart = try #require(kinds.firstIndex(of: "started late"))
        #expect(expiry < lateStart, "\(kinds)")
        try await store.close()
    }

    @Test(
        "On SQLite, the next group's transaction begins before its callers write again; when none comes, it records only what came due, counted as expiries, and no group"
    )
    func nextTransactionBeginsBeforeItsCallers() async throws {
        let (fixture, metrics) = try MetricsTests.fixture(.sqlite)
        let store = try await fixture.openTicking()
        try await store.start("due", duration: .milliseconds(5))
        let before = store.groups.stats
        store.groups.timeBound = .seconds(60)

        // As above: the second group's transaction is held open.
        let (inner, leading, held) = try await Self.holdSecondGroup(store)

        // "due" comes due while that transaction runs, which read the clocks before: it commits
        // without recording it. Its callers then end instead of writing again, and the
        // transaction begun for them records the expiry alone.
        fixture.clock.advance(by: .milliseconds(7))
        inner.open()
        #expect(try await leading.value == 1)
        for task in held { #expect(try await task.value == 1) }
        let expired = { MetricsTests.total(metrics, "countdown_items_expired_total", [("policy", "wall")]) }
        try await Self.until("the expiry recorded and counted") { expired() >= 1 }
        let stats = store.groups.stats
        #expect(stats.groups - before.groups == 2, "the transaction nobody came to is no group: \(stats)")
        #expect(stats.writes - before.writes == 2, "\(stats)")
        #expect(MetricsTests.timerCount(metrics, "countdown_write_duration_seconds", [("operation", "expire")]) == 1)

        // Recorded once, at its deadline; and the next caller leads a group of its own at once.
        let kinds = try await events(store).map { "\($0.kind) \($0.key ?? "")" }
        #expect(kinds.filter { $0 == "expired due" }.count == 1, "\(kinds)")
        let due = try #require(try await store.countdown("due"))
        #expect(due.state == .expired && due.expiredAt == due.deadlineAt)
        try await store.start("next", duration: .seconds(60))
        #expect(store.groups.stats.groups - before.groups == 3)
        #expect(expired() == 1)
        try await store.close()
    }

    @Test("A group whose transaction fails as a whole runs each write alone: the failing write fails, every other commits", arguments: TestEngine.all)
    func failedGroupRunsEachAlone(engine: TestEngine) async throws {
        struct Broken: Error {}
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let (gate, held) = try await Self.holdEveryGroup(store)
        let results = try await withThrowingTaskGroup(of: (String, Bool).self) { group in
            for index in 0..<6 {
                group.addTask {
                    do {
                        if index == 2 {
                            // Not a refusal: an error of the engine's kind, which ends the transaction.
                            _ = try await store.groupedWriting(.start) { _, _ -> Int in throw Broken() }
                        } else {
                            try await store.start("k\(index)", duration: .seconds(60))
                        }
                        return ("k\(index)", true)
                    } catch {
                        return ("k\(index)", false)
                    }
                }
            }
            try await Self.until("every caller queued") { store.groups.waitingCount == 6 }
            gate.open()
            var results: [String: Bool] = [:]
            for try await (key, ok) in group { results[key] = ok }
            return results
        }
        for task in held { _ = try await task.value }
        #expect(results == ["k0": true, "k1": true, "k2": false, "k3": true, "k4": true, "k5": true])
        for key in ["k0", "k1", "k3", "k4", "k5"] {
            #expect(try await store.countdown(key)?.state == .running, "\(key)")
            #expect(try await events(store, key: key).map(\.kind) == ["started"], "\(key) once")
        }
        try await store.close()
    }

    @Test("New keys inserted together: a removed key goes on from its generation, a key asked twice goes in once", arguments: TestEngine.all)
    func newKeysTogether(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.start("removed", duration: .seconds(60))
        try await store.remove("removed")
        let (gate, held) = try await Self.holdEveryGroup(store)
        let keys = ["a", "removed", "b", "twice", "twice", "c"]
        let tasks = keys.enumerated().map { index, key in
            Task { () -> Result<Countdown, CountdownError> in
                do throws(CountdownError) {
                    return .success(try await store.start(key, duration: .seconds(60 + index), group: "g", payload: .text("p\(index)")))
                } catch {
                    return .failure(error)
                }
            }
        }
        try await Self.until("every caller queued") { store.groups.waitingCount == keys.count }
        gate.open()
        for task in held { _ = try await task.value }
        var outcomes: [Result<Countdown, CountdownError>] = []
        for task in tasks { outcomes.append(await task.value) }
        #expect(try outcomes[1].get().generation == 2, "the removed key's generations go on")
        let twice = outcomes[3...4]
        #expect(twice.filter { (try? $0.get()) != nil }.count == 1, "one of the two starts of one key")
        #expect(twice.contains { if case .failure(let error) = $0 { error.code == .alreadyActive } else { false } })
        for (index, key) in keys.enumerated() where key != "twice" {
            let started = try outcomes[index].get()
            #expect(started.duration == .seconds(60 + index) && started.payload == .text("p\(index)"))
            #expect(try await store.countdown(key) == started)
        }
        #expect(try await events(store, key: "twice").map(\.kind) == ["started"])
        #expect(try await events(store, key: "removed").map(\.kind) == ["started", "removed", "started"])
        try await store.close()
    }

    @Test("A cancelled caller that leads a group fails no other caller's write", arguments: TestEngine.all)
    func cancelledLeaderFailsNobodyElse(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let (gate, held) = try await Self.holdEveryGroup(store)
        // The first to queue leads the next group; its task is cancelled before that group runs.
        let leader = Task { try await store.start("leader", duration: .seconds(60)) }
        try await Self.until("the leader queued") { store.groups.waitingCount == 1 }
        let others = (0..<8).map { index in Task { try await store.start("other-\(index)", duration: .seconds(60)) } }
        try await Self.until("every caller queued") { store.groups.waitingCount == 9 }
        leader.cancel()
        gate.open()
        for task in held { _ = try await task.value }
        _ = await leader.result  // its own write may fail or not: it was cancelled
        for (index, task) in others.enumerated() {
            #expect(try await task.value.key == "other-\(index)")
            #expect(try await store.countdown("other-\(index)")?.state == .running)
        }
        try await store.close()
    }

    @Test("64 tasks starting one countdown each: every one stored once with its event, in fewer transactions than calls", arguments: TestEngine.all)
    func manyTasks(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let before = store.groups.stats
        let (gate, held) = try await Self.holdEveryGroup(store)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<64 {
                group.addTask {
                    for index in 0..<5 { try await store.start("t\(task)-\(index)", duration: .seconds(600), group: "t\(task)") }
                }
            }
            try await Self.until("the first calls queued") { store.groups.waitingCount == 64 }
            gate.open()
            try await group.waitForAll()
        }
        for task in held { _ = try await task.value }
        let stats = store.groups.stats
        #expect(stats.writes - before.writes == 64 * 5 + held.count)
        #expect(stats.groups - before.groups < 64 * 5, "\(stats)")
        #expect(stats.largest <= store.capabilities.groupedWriteLimit)
        #expect(try await store.list(.all, limit: 1000).count == 64 * 5)
        let events = try await events(store)
        #expect(events.filter { $0.kind == "started" }.count == 64 * 5)
        #expect(Set(events.compactMap(\.key)).count == 64 * 5)
        // One task's calls keep their order: its keys' events come in the order it made them.
        for task in 0..<64 {
            let keys = events.compactMap(\.key).filter { $0.hasPrefix("t\(task)-") }
            #expect(keys == (0..<5).map { "t\(task)-\($0)" }, "task \(task)")
        }
        try await store.close()
    }
}
