import Foundation
import GRDB
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

/// A ticker running in a task on a fixture's store; cancelled when the test is done with it.
struct RunningTicker {
    let ticker: CountdownTicker
    let task: Task<Void, any Error>

    init(_ store: CountdownStore) async {
        ticker = CountdownTicker(store: store)
        let ticker = ticker
        task = Task { try await ticker.run() }
        await ticker.waitUntilIdle()
    }

    /// Moves virtual time forward and waits until the ticker has handled it.
    func advance(_ clock: VirtualClock, by duration: Duration, step: Duration = .milliseconds(250)) async {
        var left = duration
        while left > .zero {
            let next = min(step, left)
            clock.advance(by: next)
            left -= next
            await ticker.waitUntilIdle()
        }
    }

    func stop() async throws {
        task.cancel()
        try await task.value
    }
}

@Suite("Ticker")
struct TickerTests {
    @Test("Expiry fires at the deadline, never early, in one transaction with its event", arguments: TestEngine.all)
    func expiryFiresAtTheDeadlineNeverEarly(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let running = await RunningTicker(store)
        try await store.start("otp", duration: .seconds(10), group: "codes", payload: .text("1234"))
        await running.advance(fixture.clock, by: .milliseconds(9_999))
        #expect(try await store.countdown("otp")?.state == .running)
        #expect(try await events(store, kind: "expired").isEmpty)
        await running.advance(fixture.clock, by: .milliseconds(1))
        let item = try #require(try await store.countdown("otp"))
        #expect(item.state == .expired)
        let expiry = try #require(try await events(store, key: "otp", kind: "expired").first)
        #expect(expiry.lateMs == 0 && expiry.generation == 1)
        #expect(expiry.deadlineAtMs == item.startedAt.millisecondsSince1970 + 10_000)
        try await running.stop()
    }

    @Test("A write in the same process that moves the next deadline earlier wakes the ticker at once", arguments: TestEngine.all)
    func sameProcessWriteWakesTheTicker(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.start("later", duration: .hours(1))
        let running = await RunningTicker(store)
        try await store.start("soon", duration: .milliseconds(7))
        await running.ticker.waitUntilIdle()
        await running.advance(fixture.clock, by: .milliseconds(7), step: .milliseconds(7))
        let expiry = try #require(try await events(store, key: "soon", kind: "expired").first)
        #expect(expiry.lateMs == 0, "woken for the new deadline, not at the next periodic check")
        try await running.stop()
    }

    @Test("Another process's write is noticed within 250 ms", arguments: TestEngine.all)
    func otherProcessWriteIsNoticed(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        let other = try await fixture.open()  // another instance: its writes do not signal this one
        let running = await RunningTicker(store)
        fixture.clock.advance(by: .milliseconds(40))
        try await other.start("cli", duration: .milliseconds(5))
        await running.advance(fixture.clock, by: .milliseconds(300), step: .milliseconds(1))
        let expiry = try #require(try await events(store, key: "cli", kind: "expired").first)
        #expect(try #require(expiry.lateMs) <= 250)
        try await running.stop()
    }

    @Test("Items that came due while nothing ran expire once at start-up, oldest first, with their real lateness", arguments: TestEngine.all)
    func catchUpAtStartUp(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        do {
            let store = try await fixture.openTicking()
            try await store.start("c", duration: .minutes(5))
            try await store.start("a", duration: .seconds(1))
            try await store.start("b", duration: .seconds(2))
            try await store.start("d", duration: .hours(1))
            try await store.close()
        }
        fixture.clock.reboot(after: .minutes(10))
        let store = try await fixture.open()
        let running = await RunningTicker(store)
        let expiries = try await events(store, kind: "expired")
        #expect(expiries.map(\.key) == ["a", "b", "c"])
        #expect(expiries.map(\.lateMs) == [599_000, 598_000, 300_000])
        await running.advance(fixture.clock, by: .seconds(5))
        #expect(try await events(store, kind: "expired").count == 3, "each expired once")
        try await running.stop()
    }

    @Test("With no subscriptions and nothing due, the ticker only heartbeats and checks for writes")
    func idleTickerDoesNoOtherWork() async throws {
        let traced = try QueryTests.TracedStore()
        try await traced.store.start("far", duration: .hours(2))
        let running = await RunningTicker(traced.store)
        let statements = try await traced.allStatements {
            await running.advance(traced.clock, by: .seconds(10), step: .milliseconds(50))
        }
        // Retention is the one periodic job besides them: a pass 5 s after the lease is taken
        // (then every 30 s), a query of its own per table, each finding nothing to delete.
        let retention = statements.filter { $0.contains("countdowns_ended_by_time") }
        #expect(retention.count == 1, "one retention pass in 10 s: \(retention)")
        let reads = statements.filter(isItemQuery).filter { !$0.contains("countdowns_ended_by_time") }
        #expect(reads.isEmpty, "no item queries: \(reads.prefix(3))")
        let heartbeats = statements.filter { $0.hasPrefix("UPDATE countdown_lease") }.count
        #expect(heartbeats == 10)
        let polls = statements.filter { $0 == "PRAGMA data_version" }.count
        #expect(polls == 40)
        try await running.stop()
    }

    @Test("Display ticks fire on aligned instants for every subscription, computed without a query per tick")
    func displayTicksAreAlignedAndInMemory() async throws {
        let traced = try QueryTests.TracedStore()
        let store = traced.store
        try await store.start("a", duration: .seconds(30), group: "g")
        try await store.start("b", duration: .seconds(20), group: "g", policy: .active)
        try await store.startStopwatch("w", group: "g")
        traced.clock.advance(by: .milliseconds(437))  // off the second
        let running = await RunningTicker(store)
        let byKeys = try running.ticker.ticks(keys: ["a", "missing"], every: .seconds(1))
        let byGroup = try running.ticker.ticks(group: "g", every: .seconds(1))
        await running.ticker.waitUntilIdle()

        let (keySnapshots, groupSnapshots, statements) = try await { () async throws -> ([TickSnapshot], [TickSnapshot], [String]) in
            var keySnapshots: [TickSnapshot] = []
            var groupSnapshots: [TickSnapshot] = []
            var keyIterator = byKeys.makeAsyncIterator()
            var groupIterator = byGroup.makeAsyncIterator()
            let statements = try await traced.allStatements {
                for _ in 0..<5 {
                    await running.advance(traced.clock, by: .seconds(1), step: .milliseconds(100))
                    keySnapshots.append(try #require(await keyIterator.next()))
                    groupSnapshots.append(try #require(await groupIterator.next()))
                }
            }
            return (keySnapshots, groupSnapshots, statements)
        }()
        #expect(keySnapshots.map(\.time.wall) == groupSnapshots.map(\.time.wall), "lockstep")
        #expect(keySnapshots.allSatisfy { $0.time.wall % 1000 == 0 }, "aligned on whole seconds")
        #expect(keySnapshots.last!.items.map(\.key) == ["a"])
        #expect(groupSnapshots.last!.items.map(\.key) == ["b", "a", "w"])
        let remaining = keySnapshots.map { $0.items.first!.remaining!.milliseconds }
        #expect(zip(remaining, remaining.dropFirst()).allSatisfy { $0 - $1 == 1000 }, "\(remaining)")
        // Ticks come from memory; the only item query is retention's (a pass 5 s after the lease).
        #expect(statements.filter(isItemQuery).filter { !$0.contains("countdowns_ended_by_time") }.isEmpty, "ticks come from memory")
        try await running.stop()
    }

    @Test("Cancelling the consuming task ends the subscription", arguments: TestEngine.all)
    func cancellingEndsTheSubscription(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.start("a", duration: .minutes(1))
        let running = await RunningTicker(store)
        let ticks = try running.ticker.ticks(keys: ["a"], every: .milliseconds(500))
        let consumer = Task {
            var count = 0
            for await _ in ticks { count += 1 }
            return count
        }
        await running.advance(fixture.clock, by: .seconds(2))
        #expect(running.ticker.subscriptionCount == 1)
        consumer.cancel()
        _ = await consumer.value
        #expect(running.ticker.subscriptionCount == 0)
        try await running.stop()
    }

    @Test("suspend() and resume() stop and restart active time while the ticker runs", arguments: TestEngine.all)
    func suspendAndResumeWithTheTicker(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.start("screen", duration: .minutes(1), policy: .active)
        try await store.start("pay", duration: .minutes(1), policy: .wall)
        let running = await RunningTicker(store)
        await running.advance(fixture.clock, by: .seconds(10))
        try await store.enterBackground()
        await running.advance(fixture.clock, by: .seconds(55))
        #expect(try await store.countdown("pay")?.state == .expired)
        #expect(try await store.countdown("screen")?.remaining == .seconds(50))
        try await store.enterForeground()
        await running.advance(fixture.clock, by: .seconds(50))
        #expect(try await store.countdown("screen")?.state == .expired)
        #expect(try await events(store, key: "screen", kind: "expired").first?.lateMs == 0)
        try await running.stop()
    }

    @Test("Stopping the ticker writes a final heartbeat and frees the lease", arguments: TestEngine.all)
    func stoppingWritesAFinalHeartbeat(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.open()
        try await store.start("screen", duration: .minutes(1), policy: .active)
        let running = await RunningTicker(store)
        await running.advance(fixture.clock, by: .milliseconds(1700))
        try await running.stop()
        let status = try await store.clockStatus()
        #expect(status.leaseHolder == nil)
        #expect(status.lastHeartbeat == Date(millisecondsSince1970: status.now.wall))
        fixture.clock.advance(by: .hours(1))
        #expect(try await store.countdown("screen")?.elapsed == .milliseconds(1700), "nothing lost, nothing counted after")
    }

    @Test("Of two tickers on one database, one holds the lease; the other takes over when it stops", arguments: TestEngine.all)
    func oneTickerHoldsTheLease(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let first = await RunningTicker(try await fixture.open())
        let second = await RunningTicker(try await fixture.open())
        await first.advance(fixture.clock, by: .seconds(3))
        await second.ticker.waitUntilIdle()
        let holders = [first, second].filter { if case .held = $0.ticker.leaseStatus { true } else { false } }
        #expect(holders.count == 1)
        try await holders[0].stop()
        let standby = holders[0].ticker === first.ticker ? second : first
        await standby.advance(fixture.clock, by: .seconds(2))
        if case .held = standby.ticker.leaseStatus {} else { Issue.record("the standby ticker did not take over") }
        try await standby.stop()
    }

    @Test("While a ticker runs, WAL checkpoints leave its commits for moments with no deadline near, and come back after")
    func checkpointsWaitForQuietMoments() async throws {
        let fixture = try Fixture()
        let store = try await fixture.open()
        func automaticCheckpoint() async throws -> Int? {
            try await store.grdb.read { db in try Int.fetchOne(db, sql: "PRAGMA wal_autocheckpoint") }
        }
        #expect(try await automaticCheckpoint() == 262_144, "a commit checkpoints by itself only past 1 GiB of WAL")
        let running = await RunningTicker(store)
        let checkpointer = try #require(running.ticker.upkeep as? WALCheckpointer)
        #expect(try await automaticCheckpoint() == 0, "no commit of the ticker's connection checkpoints")

        // Well over 1,000 pages written while a deadline is 20 ms away: no checkpoint yet.
        try await store.start("soon", duration: .milliseconds(20))
        try await store.start((0..<20_000).map { .countdown("k\($0)", duration: .hours(1)) })
        await running.advance(fixture.clock, by: .milliseconds(10), step: .milliseconds(1))
        #expect(checkpointer.checkpointsRun == 0 && !checkpointer.isCheckpointing)

        // The deadline passes; the next is an hour away: the checkpoint runs.
        await running.advance(fixture.clock, by: .milliseconds(10), step: .milliseconds(1))
        #expect(try await store.countdown("soon")?.state == .expired)
        await checkpointer.waitForCheckpoints(1)

        try await running.stop()
        #expect(try await automaticCheckpoint() == 262_144, "stopping hands checkpoints back to the store's setting")
    }

    @Test("Between the batches of a backlog, a WAL past its bound waits for a checkpoint that starts it over, so it never grows with the backlog")
    func backlogStartsTheWALOver() async throws {
        let fixture = try Fixture()
        let store = try await fixture.open()
        let repository = try #require(store.engine as? SQLiteEngine)
        let checkpointer = try WALCheckpointer.start(for: repository, path: fixture.path, pagesBeforeARestart: 200)
        // Well over 200 pages of WAL, in batches as a backlog commits them.
        for batch in 0..<10 {
            try await store.start((0..<500).map { .countdown("k\(batch)-\($0)", duration: .hours(1)) })
            await checkpointer.betweenBatches()
        }
        let walBytes = try FileManager.default.attributesOfItem(atPath: fixture.path + "-wal")[.size] as? Int ?? 0
        #expect(checkpointer.framesInWAL < 200, "the WAL started over: \(checkpointer.framesInWAL) frames after the last commit")
        #expect(walBytes < 3 << 20, "the WAL file stayed small: \(walBytes) bytes")
        #expect(checkpointer.checkpointsRun >= 1)
        await checkpointer.stop()
        #expect(try await store.counts().count(.running) == 5_000)
    }

    @Test("With durability .full, commits checkpoint at SQLite's 1,000 pages: the WAL is written over from its start, not grown at every synced commit")
    func fullDurabilityKeepsTheWALSmall() async throws {
        var fixture = try Fixture()
        fixture.configuration.durability = .full
        let store = try await fixture.open()
        func automaticCheckpoint() async throws -> Int? {
            try await store.grdb.read { db in try Int.fetchOne(db, sql: "PRAGMA wal_autocheckpoint") }
        }
        #expect(try await automaticCheckpoint() == 1000)
        func walBytes() throws -> Int {
            (try FileManager.default.attributesOfItem(atPath: fixture.path + "-wal")[.size] as? Int) ?? 0
        }
        // 40,000 countdowns in 80 commits: about 4,000 pages of WAL in all.
        for batch in 0..<80 {
            try await store.start((0..<500).map { .countdown("k\(batch)-\($0)", duration: .hours(1)) })
        }
        let wal = try walBytes()
        #expect(wal > 0 && wal < 8 << 20, "the WAL stays near 1,000 pages: \(wal) bytes")
        #expect(try await store.counts().count(.running) == 40_000)

        let running = await RunningTicker(store)
        #expect(try await automaticCheckpoint() == 0, "the ticker's checkpointer takes over")
        try await running.stop()
        #expect(try await automaticCheckpoint() == 1000, "stopping hands checkpoints back to the store's setting")
    }
}

/// Whether `sql` reads item rows: the clock query, which looks up the soonest deadlines in the
/// deadline index as part of every transaction, does not count.
private func isItemQuery(_ sql: String) -> Bool {
    sql.contains("FROM countdowns") && !sql.contains("FROM countdown_clock")
}
