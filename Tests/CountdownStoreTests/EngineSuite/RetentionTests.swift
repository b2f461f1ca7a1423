import Foundation
import Testing

@testable import CountdownStoreCore

/// Retention on every engine: a running ticker prunes by itself, in batches, never deletes what
/// a live named consumer has not read, and leaves nothing behind for a key that is gone.
@Suite("Retention")
struct RetentionTests {
    /// A fixture with `retention`.
    static func fixture(_ engine: TestEngine, _ retention: CountdownStore.Retention) throws -> Fixture {
        var fixture = try Fixture(engine: engine)
        fixture.configuration.retention = retention
        return fixture
    }

    /// Row counts of the tables that could grow.
    static func rows(_ store: CountdownStore) async throws -> [String: Int] {
        try await store.engine.read { tx in
            var counts: [String: Int] = [:]
            counts["countdowns"] = try tx.counts().reduce(0) { $0 + $1.count }
            counts["countdown_events"] = try tx.events(afterID: 0, limit: Int(Int32.max)).count
            return counts
        }
    }

    @Test("A running ticker prunes by itself: ended countdowns and passed events older than the period", arguments: TestEngine.all)
    func tickerPrunes(engine: TestEngine) async throws {
        let fixture = try Self.fixture(engine, .init(endedItems: .seconds(3600), events: .seconds(3600), batchSize: 7))
        let store = try await fixture.open()
        let running = await RunningTicker(store)
        try await store.start((0..<30).map { .countdown("o-\($0)", duration: .seconds(10)) })
        await running.advance(fixture.clock, by: .minutes(10), step: .seconds(1))
        try await store.start("kept", duration: .hours(10))
        #expect(try await store.list(.expired, limit: 100).count == 30)
        await running.advance(fixture.clock, by: .minutes(55), step: .seconds(5))
        // Retention runs in a task of its own beside the ticker's loop: wait for its pass (real
        // time, bounded), letting virtual time go on in small steps so that the next one comes.
        try await eventually("retention pruned the ended countdowns and their events", limit: 60) {
            await running.advance(fixture.clock, by: .milliseconds(100))
            let kinds = try await events(store).map(\.kind)
            return try await store.list(.all, limit: 100).map(\.key) == ["kept"] && !kinds.contains("expired")
        }
        let kinds = try await events(store).map(\.kind)
        #expect(kinds.contains("pruned"), "\(kinds)")
        #expect(try await events(store, key: "kept").map(\.kind) == ["started"], "an event younger than the period stays")
        try await running.stop()
        try await store.close()
    }

    @Test("Events a live named consumer has not read stay; a consumer unread past the period stops holding them, once said", arguments: TestEngine.all)
    func consumersHoldEventsBack(engine: TestEngine) async throws {
        let fixture = try Self.fixture(
            engine, .init(endedItems: .seconds(60), events: .seconds(60), staleConsumer: .seconds(3600), batchSize: 5))
        let store = try await fixture.openTicking()
        let mailer = try await store.consumer("mailer")
        try await store.start((0..<12).map { .countdown("k-\($0)", duration: .seconds(1)) })
        try await run(store, fixture.clock, for: .minutes(5))
        try await store.expireDue()
        let held = try await store.applyRetention()
        #expect(held.items == 12 && held.events == 0, "mailer has read nothing: \(held)")
        // Unread for longer than the period: it no longer holds the events back.
        try await run(store, fixture.clock, for: .minutes(61), step: .seconds(30))
        let released = try await store.applyRetention()
        #expect(released.events >= 24, "\(released)")
        let stale = try await events(store, kind: "consumer_stale")
        #expect(stale.count == 1 && stale.first?.detail?.contains("\"consumer\":\"mailer\"") == true, "\(stale)")
        _ = try await store.applyRetention()
        #expect(try await events(store, kind: "consumer_stale").count == 1, "said once")
        _ = mailer
        try await store.close()
    }

    @Test("A removed key leaves nothing once its events are gone; until then its generations go on", arguments: TestEngine.all)
    func retiredKeysGo(engine: TestEngine) async throws {
        let fixture = try Self.fixture(engine, .init(endedItems: .seconds(60), events: .seconds(60)))
        let store = try await fixture.openTicking()
        try await store.start("order-1", duration: .seconds(5))
        try await store.restart("order-1")
        try await store.remove("order-1")
        try await run(store, fixture.clock, for: .seconds(30))
        #expect(try await store.start("order-1", duration: .seconds(5)).generation == 3, "its events remain: generations go on")
        try await store.remove("order-1")
        try await run(store, fixture.clock, for: .minutes(3))
        let pruned = try await store.applyRetention()
        #expect(pruned.retiredKeys == 1 && pruned.events >= 5, "\(pruned)")
        let retired = try await store.engine.read { tx in try tx.retiredGeneration(key: "order-1") }
        #expect(retired == nil)
        #expect(try await store.start("order-1", duration: .seconds(5)).generation == 1, "no event of an older generation is left")
        try await store.close()
    }

    @Test("prune deletes in batches, reporting its progress, oldest first", arguments: TestEngine.all)
    func pruneInBatches(engine: TestEngine) async throws {
        let fixture = try Self.fixture(engine, .init(batchSize: 100))
        let store = try await fixture.openTicking()
        try await store.start((0..<250).map { .countdown("p-\($0)", duration: .seconds(1)) })
        try await run(store, fixture.clock, for: .seconds(5))
        try await store.expireDue()
        fixture.clock.advance(by: .seconds(3600))
        let steps = Locked<[PruneResult]>([])
        let result = try await store.prune(olderThan: .seconds(60)) { totals in steps.withLock { $0.append(totals) } }
        #expect(result.items == 250 && result.events == 500, "\(result)")
        let items = steps.withLock { $0 }.map(\.items)
        #expect(Array(items.prefix(3)) == [100, 200, 250], "\(items)")
        #expect(try await store.list(.all, limit: 10).isEmpty)
        try await store.close()
    }
}
