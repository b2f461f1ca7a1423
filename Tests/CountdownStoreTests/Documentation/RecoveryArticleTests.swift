import CountdownStore
import Foundation
import GRDB
import Testing

// The code of the article "Recovery and delivery guarantees"
// (CountdownStore.docc/RecoveryAndDelivery.md), compiled here so it cannot drift from the API,
// and run on virtual time by the tests below, which check what the article promises.

/// The article's named consumer: every expiry at least once, acknowledged once it is handled.
/// It runs until its task is cancelled, or until `sendReminder` throws.
func recoveryArticleMailer(
    _ store: CountdownStore, sendReminder: @escaping @Sendable (CountdownEvent) async throws -> Void
) async throws {
    let mailer = try await store.consumer("mailer")
    for try await expiry in try await mailer.events(.expiries) {
        try await sendReminder(expiry)        // the side effect: a mail, a webhook, a refund
        try await mailer.acknowledge(expiry)  // done: this event and every one before it
    }
}

/// The article's way of telling whether this instance's ticker is the one firing expiries.
func recoveryArticleDescribeLease(_ ticker: CountdownTicker) -> String {
    switch ticker.leaseStatus {
    case .held(let until)?:
        return "holding the lease until \(until): advancing A and firing expiries"
    case .heldElsewhere(let holder, _)?:
        return "standing by: \(holder) holds the lease"
    case nil:
        return "not running"
    }
}

/// A simulated crash of the handler, before its acknowledgement.
struct RecoveryArticleCrash: Error {}

@Suite("Article: Recovery and delivery guarantees")
struct RecoveryArticleTests {
    /// A running ticker on one store instance.
    private struct Running {
        let ticker: CountdownTicker
        let task: Task<Void, any Error>

        init(_ store: CountdownStore) async {
            ticker = CountdownTicker(store: store)
            let ticker = ticker
            task = Task { try await ticker.run() }
            await ticker.waitUntilIdle()
        }

        func stop() async throws {
            task.cancel()
            try await task.value
        }
    }

    /// Moves the clock in steps of 250 ms, letting every ticker handle each step.
    private static func advance(_ clock: VirtualClock, by duration: Duration, _ tickers: [CountdownTicker]) async {
        var left = duration
        while left > .zero {
            let step = min(left, .milliseconds(250))
            clock.advance(by: step)
            left -= step
            for ticker in tickers { await ticker.waitUntilIdle() }
        }
    }

    @Test("A named consumer gets every expiry at least once, across a restart, and resumes after its last acknowledgement", .timeLimit(.minutes(5)))
    func namedConsumer() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path()
        let clock = VirtualClock()
        let firstRunCrashed: Bool
        do {
            let store = try CountdownStore(path: path, configuration: .init(clock: clock))
            let running = await Running(store)
            for (index, key) in ["a", "b", "c", "d"].enumerated() {
                try await store.start(key, duration: .seconds(Int64(index) + 1))
            }
            await Self.advance(clock, by: .seconds(5), [running.ticker])

            // The first run handles a and b, then dies while handling c, before acknowledging it.
            let (sent, sink) = AsyncStream.makeStream(of: String.self)
            let mailer = Task {
                try await recoveryArticleMailer(store) { expiry in
                    sink.yield(expiry.key ?? "")
                    if expiry.key == "c" { throw RecoveryArticleCrash() }
                }
            }
            firstRunCrashed = await (try? mailer.value) == nil
            sink.finish()
            var keys: [String] = []
            for await key in sent { keys.append(key) }
            #expect(keys == ["a", "b", "c"])
            let acknowledged = try await store.consumer("mailer").acknowledgedThrough()
            let expiryOfB = try #require(try await store.recentEvents(kinds: [.expired]).first { $0.key == "b" })
            #expect(acknowledged == expiryOfB.id, "the cursor stands after b")
            try await running.stop()
            try await store.close()
        }
        #expect(firstRunCrashed)

        // The next run, in a new store instance (a restarted process), starts after b.
        let store = try CountdownStore(path: path, configuration: .init(clock: clock))
        let (sent, sink) = AsyncStream.makeStream(of: String.self)
        let mailer = Task {
            try await recoveryArticleMailer(store) { expiry in sink.yield(expiry.key ?? "") }
        }
        var keys: [String] = []
        for await key in sent {
            keys.append(key)
            if keys.count == 2 { break }
        }
        #expect(keys == ["c", "d"], "c again (never acknowledged), then d; a and b not again")
        mailer.cancel()
        try await mailer.value

        // The acknowledgement is cumulative, and the cursor never moves back.
        let consumer = try await store.consumer("mailer")
        let cursor = try await consumer.acknowledgedThrough()   // the id of the last event handled
        let last = try #require(try await store.recentEvents(limit: 1).first)
        #expect(cursor == last.id)
        try await consumer.acknowledge(through: 1)
        #expect(try await consumer.acknowledgedThrough() == cursor)
        try await store.close()
    }

    @Test("Where a new consumer starts; live events are not replayed", .timeLimit(.minutes(5)))
    func startingPoints() async throws {
        let folder = try TemporaryFolder()
        let store = try CountdownStore(path: folder.path(), configuration: .init(clock: VirtualClock()))
        try await store.start("before", duration: .seconds(60))

        let audit = try await store.consumer("audit", startingAt: .now)   // only what happens from now on
        let archive = try await store.consumer("archive")                 // from the oldest event still held
        let display = try await store.events()                            // live: from now on, nothing persisted

        try await store.start("after", duration: .seconds(60))
        var fromAudit = try await audit.events().makeAsyncIterator()
        var fromArchive = try await archive.events().makeAsyncIterator()
        var fromDisplay = display.makeAsyncIterator()
        #expect(try await fromAudit.next()?.key == "after")
        #expect(try await fromArchive.next()?.key == "before")
        #expect(try await fromArchive.next()?.key == "after")
        #expect(try await fromDisplay.next()?.key == "after")
        try await store.close()
    }

    @Test("An expiry superseded by a newer generation is never delivered", .timeLimit(.minutes(5)))
    func supersededExpiry() async throws {
        let folder = try TemporaryFolder()
        let clock = VirtualClock()
        let store = try CountdownStore(path: folder.path(), configuration: .init(clock: clock))
        let ticker = CountdownTicker(store: store)
        let running = Task { try await ticker.run() }
        await ticker.waitUntilIdle()
        let pass = timePasser(clock)  // the article's `pass(_:_:)`

        try await store.start("otp:alice", duration: .seconds(30))
        await pass(.seconds(31), ticker)        // generation 1 expires; no consumer has read it yet
        try await store.restart("otp:alice")    // generation 2: that expiry is stale now
        await pass(.seconds(31), ticker)        // generation 2 expires

        let mailer = try await store.consumer("mailer")
        var expiries = try await mailer.events(.expiries).makeAsyncIterator()
        let expiry = try await expiries.next()
        print(expiry?.key ?? "", expiry?.generation ?? 0)   // otp:alice 2

        #expect(expiry?.key == "otp:alice" && expiry?.generation == 2)
        let recorded = try await store.recentEvents(kinds: [.expired]).map(\.generation)
        #expect(recorded == [2, 1], "generation 1 did expire and is recorded; it is only not delivered")
        running.cancel()
        try await running.value
        try await store.close()
    }

    @Test("Two instances on one file: one holds the lease and fires expiries, the other stands by and takes over", .timeLimit(.minutes(5)))
    func leaseAndStandby() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path()
        let clock = VirtualClock()
        // Two instances on one file, as two processes would have.
        let one = try CountdownStore(path: path, configuration: .init(clock: clock))
        let two = try CountdownStore(path: path, configuration: .init(clock: clock))
        let first = await Running(one)
        let second = await Running(two)
        print(recoveryArticleDescribeLease(first.ticker))    // holding the lease until …
        print(recoveryArticleDescribeLease(second.ticker))   // standing by: … holds the lease
        #expect(recoveryArticleDescribeLease(first.ticker).hasPrefix("holding"))
        #expect(recoveryArticleDescribeLease(second.ticker).hasPrefix("standing by: \(one.instanceID)"))

        try await two.start("job", duration: .seconds(2))
        let expiries = try await two.events(.expiries)
        await Self.advance(clock, by: .seconds(3), [first.ticker, second.ticker])
        var iterator = expiries.makeAsyncIterator()
        #expect(try await iterator.next()?.key == "job")

        // The holder stops gracefully: it frees the lease, and the standby takes it at its next heartbeat.
        try await first.stop()
        try await one.close()
        await Self.advance(clock, by: .seconds(1), [second.ticker])
        #expect(recoveryArticleDescribeLease(second.ticker).hasPrefix("holding"))
        try await two.start("next", duration: .seconds(1), policy: .active)
        await Self.advance(clock, by: .seconds(2), [second.ticker])
        #expect(try await iterator.next()?.key == "next")
        try await second.stop()
        try await two.close()
    }

    @Test("Every operation is one transaction that appends its event", .timeLimit(.minutes(5)))
    func oneTransactionOneEvent() async throws {
        let folder = try TemporaryFolder()
        let clock = VirtualClock()
        let store = try CountdownStore(path: folder.path(), configuration: .init(clock: clock))
        try await store.start("order-1042", duration: .seconds(900), group: "payments")
        try await store.pause("order-1042")
        try await store.resume("order-1042")
        try await store.extend("order-1042", by: .seconds(300))
        try await store.cancel("order-1042")

        for event in try await store.recentEvents(limit: 5).reversed() {
            print(event.id, event.kind, event.key ?? "", event.generation ?? 0)
        }
        // 1 started order-1042 1
        // 2 paused order-1042 1
        // 3 resumed order-1042 1
        // 4 extended order-1042 2
        // 5 cancelled order-1042 2

        let events = try await store.recentEvents(limit: 5).reversed()
        #expect(events.map(\.id) == [1, 2, 3, 4, 5])
        #expect(events.map(\.kind) == [.started, .paused, .resumed, .extended, .cancelled])
        #expect(events.map(\.generation) == [1, 1, 1, 2, 2])

        // Refused input changes nothing: no row, no event.
        await #expect(throws: CountdownError.self) { try await store.start("order-1043", duration: .zero) }
        #expect(try await store.recentEvents(limit: 1).first?.id == 5)
        #expect(try await store.countdown("order-1043") == nil)
        try await store.close()
    }

    @Test("prune keeps the events a named consumer has not acknowledged", .timeLimit(.minutes(5)))
    func pruneKeepsUnacknowledgedEvents() async throws {
        let folder = try TemporaryFolder()
        let clock = VirtualClock()
        let store = try CountdownStore(path: folder.path(), configuration: .init(clock: clock))
        let mailer = try await store.consumer("mailer")
        try await store.start("old", duration: .seconds(60))
        try await store.cancel("old")
        clock.advance(by: .seconds(8 * 86_400))

        let pruned = try await store.prune(olderThan: .seconds(7 * 86_400))  // 7 days
        print(pruned.items, pruned.events)                                   // 1 0: "mailer" has not seen the events

        #expect(pruned.items == 1 && pruned.events == 0)
        var unseen = try await mailer.events().makeAsyncIterator()
        let first = try #require(try await unseen.next())
        #expect(first.key == "old" && first.kind == .started)
        let second = try #require(try await unseen.next())
        try await mailer.acknowledge(second)
        #expect(try await store.prune(olderThan: .seconds(7 * 86_400)).events == 2)
        try await store.close()
    }

    @Test("Durability full: the store syncs every commit")
    func durabilityFull() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path()
        let store = try CountdownStore(path: path, configuration: .init(durability: .full))
        let synchronous = try await store.grdb.read { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        #expect(synchronous == 2, "synchronous = FULL")
        try await store.close()
    }

    @Test("A file that is not a CountdownStore database is refused with a typed error and left untouched")
    func damagedFile() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path()
        let text = Data("shopping list: eggs, milk\n".utf8)
        try text.write(to: URL(fileURLWithPath: path))

        do {
            let store = try CountdownStore(path: path)
            try await store.close()
        } catch {
            print(error.code, error.message)   // unreadableDatabase the file at '…' is not an SQLite database; it was left untouched
        }

        let refusal = try #require(throws: CountdownError.self) { try CountdownStore(path: path) }
        #expect(refusal.code == .unreadableDatabase)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == text)
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))

        // A sound store reports its integrity as `countdown doctor` does.
        let store = try CountdownStore(path: folder.path("sound.sqlite"))
        let integrity = try await store.diagnostics().integrity
        print(integrity)   // ["ok"]

        #expect(integrity == ["ok"])
        try await store.close()
    }
}
