import Foundation
import Testing

@testable import CountdownStoreCore

/// A named consumer of some kinds or of one group claims its events through the indexes by kind
/// and by group, on every engine: its first claim holds its first event however many events of
/// other kinds and groups came first, it never reads theirs, and its cursor still moves past them.
@Suite("A consumer reads only what it delivers")
struct ConsumerIndexTests {
    static func fixture(_ engine: TestEngine) throws -> Fixture {
        var fixture = try Fixture(engine: engine)
        fixture.configuration.retention = .keepEverything
        return fixture
    }

    /// Starts `count` countdowns of `group` in bulk, each due after `ms`.
    static func start(_ store: CountdownStore, _ prefix: String, group: String?, count: Int, ms: Int64) async throws {
        for first in stride(from: 0, to: count, by: 1000) {
            try await store.start(
                (first..<min(first + 1000, count)).map {
                    .countdown("\(prefix)-\($0)", duration: .milliseconds(ms), group: group)
                })
        }
    }

    @Test("Behind 5,000 events of another group and other kinds, a group's consumer and an expiry consumer each get their first expiry in their first claim", arguments: TestEngine.all)
    func firstClaimHoldsTheFirstEvent(engine: TestEngine) async throws {
        let fixture = try Self.fixture(engine)
        let store = try await fixture.openTicking()
        _ = try await store.consumer("vip")
        _ = try await store.consumer("expiries")
        _ = try await store.consumer("sale-all")
        try await Self.start(store, "vip", group: "vip", count: 1, ms: 1_000)
        // 5,000 started events of another group after it, then its expiry, then the sale's.
        try await Self.start(store, "sale", group: "sale", count: 5_000, ms: 2_000)
        try await run(store, fixture.clock, for: .milliseconds(1_500))
        try await store.expireDue()
        let vip = try await store.claimEvents(
            consumer: "vip", claimant: "r1", filter: EventFilter(kinds: [.expired], group: "vip"))
        #expect(vip?.map(\.key) == ["vip-0"], "the group's expiry, in its first claim")
        let expiries = try await store.claimEvents(consumer: "expiries", claimant: "r1", filter: .expiries)
        #expect(expiries?.map(\.key) == ["vip-0"], "the first expiry, in the first claim")
        // A group's consumer of every kind: the group's own events, by kind through the index.
        let saleAll = try await store.claimEvents(
            consumer: "sale-all", claimant: "r1", filter: EventFilter(group: "sale"))
        #expect(saleAll?.count == 512 && saleAll?.allSatisfy { $0.group == "sale" && $0.kind == .started } == true)
        // Acknowledged, the group's consumer has nothing more until the sale ends, and its
        // cursor has moved past every event it was not given.
        let vipID = try #require(vip?.first?.id)
        #expect(try await store.acknowledge(consumer: "vip", eventID: vipID, claimant: "r1"))
        #expect(
            try await store.claimEvents(
                consumer: "vip", claimant: "r1", filter: EventFilter(kinds: [.expired], group: "vip")) == nil)
        try await run(store, fixture.clock, for: .seconds(1))
        try await store.expireDue()
        // The sale's 5,000 expiries: the VIP's consumer reads none of them, yet its cursor moves
        // on past them (a cursor held back would hold retention back).
        #expect(
            try await store.claimEvents(
                consumer: "vip", claimant: "r1", filter: EventFilter(kinds: [.expired], group: "vip"), probing: false)
                ?? [] == [])
        let cursor = try await store.reading { tx, _ in try tx.consumerCursor("vip") }
        let last = try await store.lastEventID()
        #expect(cursor == last, "the cursor moved past the others' events: \(String(describing: cursor)) of \(last)")
        // The expiry consumer gets the sale's expiries, 512 at a time, in order.
        var delivered = 0
        var previous: Int64 = 0
        while let batch = try await store.claimEvents(consumer: "expiries", claimant: "r1", filter: .expiries) {
            #expect(batch.allSatisfy { $0.kind == .expired })
            for event in batch {
                #expect(event.id > previous)
                previous = event.id
            }
            delivered += batch.count
            if let lastID = batch.last?.id {
                #expect(try await store.acknowledge(consumer: "expiries", eventID: lastID, claimant: "r1"))
            }
            if delivered > 10_000 { break }
        }
        #expect(delivered == 5_000, "every sale expiry once: \(delivered)")
        try await store.close()
    }

    @Test("A lapsed claim of a filtered reader goes to the next reader, which reads on through the index", arguments: TestEngine.all)
    func lapsedClaimThroughTheIndex(engine: TestEngine) async throws {
        var fixture = try Self.fixture(engine)
        fixture.configuration.claimTimeout = .seconds(5)
        let store = try await fixture.openTicking()
        _ = try await store.consumer("shop")
        let filter = EventFilter(kinds: [.expired], group: "shop")
        try await Self.start(store, "shop", group: "shop", count: 600, ms: 1_000)
        try await Self.start(store, "other", group: "other", count: 2_000, ms: 1_000)
        try await run(store, fixture.clock, for: .milliseconds(1_500))
        try await store.expireDue()
        let first = try #require(try await store.claimEvents(consumer: "shop", claimant: "dead", filter: filter))
        #expect(first.count == 512 && first.allSatisfy { $0.group == "shop" })
        // Its reader dies: after the claim runs out, another reader takes it over, then the rest.
        try await run(store, fixture.clock, for: .seconds(6))
        var keys: [String] = []
        while let batch = try await store.claimEvents(consumer: "shop", claimant: "alive", filter: filter) {
            keys += batch.compactMap(\.key)
            if let lastID = batch.last?.id {
                #expect(try await store.acknowledge(consumer: "shop", eventID: lastID, claimant: "alive"))
            }
            if keys.count > 2_000 { break }
        }
        #expect(keys.count == 600 && Set(keys).count == 600, "every expiry of the group once: \(keys.count)")
        #expect(keys.allSatisfy { $0.hasPrefix("shop-") })
        try await store.close()
    }
}
