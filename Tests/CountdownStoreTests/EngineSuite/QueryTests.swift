import Foundation
import Testing

@testable import CountdownStoreCore

/// The store's queries on every engine: active items soonest first across policies and pauses,
/// paged by cursor; every figure of an answer computed at one instant; expired items newest first,
/// by group and since an instant; paused items, items expiring within a window, counts and the
/// next deadline.
@Suite("Queries")
struct QueryTests {
    @Test("Active items come soonest first across policies and pauses, stopwatches last, paged by cursor", arguments: TestEngine.all)
    func activeItemsArePagedSoonestFirst(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        try await store.start("wall-30", duration: .seconds(30), policy: .wall)
        try await store.start("active-20", duration: .seconds(20), policy: .active)
        try await store.start("paused-25", duration: .seconds(25))
        try await store.pause("paused-25")
        try await store.start("wall-10", duration: .seconds(10), policy: .wall, payload: .text("x"))
        try await store.startStopwatch("watch-b")
        try await store.startStopwatch("watch-a", policy: .active)
        try await store.start("ended", duration: .seconds(5))
        try await store.cancel("ended")
        // A suspend makes the wall items run ahead of the active ones.
        try await store.enterBackground()
        fixture.clock.advance(by: .seconds(8))
        try await store.enterForeground()

        let whole = try await store.active()
        #expect(whole.items.map(\.key) == ["wall-10", "active-20", "wall-30", "paused-25", "watch-a", "watch-b"])
        #expect(whole.next == nil)
        #expect(whole.items.map(\.remaining) == [.seconds(2), .seconds(20), .seconds(22), .seconds(25), nil, nil])

        var keys: [String] = []
        var cursor: ActiveCursor?
        repeat {
            let page = try await store.active(limit: 2, after: cursor)
            keys += page.items.map(\.key)
            cursor = page.next
            fixture.clock.advance(by: .seconds(1))  // time passes between pages; the order holds
        } while cursor != nil
        #expect(keys == whole.items.map(\.key))
    }

    @Test("Every item of one answer carries figures computed at one instant", arguments: TestEngine.all)
    func figuresShareOneInstant(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        try await store.start((0..<50).map { .countdown("k\($0)", duration: .minutes(10)) })
        try await run(store, fixture.clock, for: .seconds(3))
        let page = try await store.active()
        #expect(Set(page.items.map(\.computedAt)).count == 1)
        #expect(Set(page.items.map(\.remaining)).count == 1)
    }

    @Test("Expired items come newest first, by group and since an instant", arguments: TestEngine.all)
    func expiredItems(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        for (index, group) in ["a", "b", "a", "b", "a"].enumerated() {
            try await store.start("e\(index)", duration: .seconds(1), group: group)
            try await run(store, fixture.clock, for: .seconds(2))
            try await store.expireDue()
        }
        #expect(try await store.expired().map(\.key) == ["e4", "e3", "e2", "e1", "e0"])
        #expect(try await store.expired(group: "a").map(\.key) == ["e4", "e2", "e0"])
        let third = try #require(try await store.countdown("e2")?.expiredAt)
        #expect(try await store.expired(since: third).map(\.key) == ["e4", "e3", "e2"])
        #expect(try await store.expired(limit: 2).map(\.key) == ["e4", "e3"])
    }

    @Test("Paused items, items expiring within a window, counts and the next deadline", arguments: TestEngine.all)
    func otherQueries(engine: TestEngine) async throws {
        let fixture = try Fixture(engine: engine)
        let store = try await fixture.openTicking()
        try await store.start("soon", duration: .seconds(5), group: "x")
        try await store.start("later", duration: .minutes(5), group: "x", policy: .active)
        try await store.start("paused", duration: .minutes(1), group: "y")
        try await store.pause("paused")
        try await store.startStopwatch("watch", group: "y")
        try await store.pause("watch")
        try await store.start("gone", duration: .seconds(1))
        try await store.cancel("gone")

        #expect(try await store.paused().map(\.key) == ["paused", "watch"])
        #expect(try await store.expiring(within: .seconds(10)).map(\.key) == ["soon"])
        #expect(try await store.expiring(within: .hours(1)).map(\.key) == ["soon", "later"])
        #expect(try await store.nextDeadline()?.key == "soon")
        let counts = try await store.counts()
        #expect(counts.count(.running) == 2 && counts.count(.paused) == 2 && counts.count(.cancelled) == 1)
        #expect(counts.count(.paused, group: "y") == 2 && counts.total == 5)
    }
}
