import Foundation
import GRDB
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

/// The ticker on SQLite, read from the statements it executes and from the WAL: idle, it only
/// heartbeats and checks `PRAGMA data_version`; display ticks come from memory; WAL checkpoints wait
/// for moments with no deadline near, and the WAL stays small under a backlog and with `.full`.
@Suite("Ticker on SQLite")
struct TickerSQLiteTests {
    @Test("With no subscriptions and nothing due, the ticker only heartbeats and checks for writes")
    func idleTickerDoesNoOtherWork() async throws {
        let traced = try QuerySQLiteTests.TracedStore()
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
        let traced = try QuerySQLiteTests.TracedStore()
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

    @Test("A WAL file grown past its size is trimmed back by the checkpointer in short steps; no commit of the store cuts it")
    func walFileTrimmedInSteps() async throws {
        let fixture = try Fixture()
        let store = try await fixture.open()
        let repository = try #require(store.engine as? SQLiteEngine)
        func walBytes() throws -> Int64 {
            Int64((try FileManager.default.attributesOfItem(atPath: fixture.path + "-wal")[.size] as? Int) ?? 0)
        }
        #expect(
            try await store.grdb.read { db in try Int.fetchOne(db, sql: "PRAGMA journal_size_limit") } == -1,
            "the store's connections never cut the WAL in a commit")
        // No ticker: the WAL grows with the writes (several MiB).
        for batch in 0..<20 {
            try await store.start((0..<500).map { .countdown("k\(batch)-\($0)", duration: .hours(1)) })
        }
        let grown = try walBytes()
        #expect(grown > 2 << 20, "\(grown) bytes")

        let (size, step): (Int64, Int64) = (1 << 20, 256 << 10)
        let checkpointer = try WALCheckpointer.start(
            for: repository, path: fixture.path, trimmedWALBytes: size, trimStepBytes: step)
        checkpointer.idle(untilNextDeadlineMs: nil)
        let end = ContinuousClock.now + .seconds(30)
        while try walBytes() > size, ContinuousClock.now < end {
            try await Task.sleep(for: .milliseconds(5))
        }
        // A step cuts the file to at most `step` below its size, and to no less than `size`.
        let trimmed = try walBytes()
        #expect(trimmed <= size && trimmed > 0, "\(trimmed) bytes")
        // Counted once stopped: the checkpointer counts a step after the cut is seen in the file.
        await checkpointer.stop()
        let steps = checkpointer.trimmingSteps
        #expect(Int64(steps) >= (grown - size + step - 1) / step, "\(steps) steps from \(grown) to \(trimmed) bytes")
        #expect(try await store.counts().count(.running) == 10_000)
        try await store.start("after", duration: .hours(1))
        #expect(try await store.countdown("after")?.state == .running)
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
