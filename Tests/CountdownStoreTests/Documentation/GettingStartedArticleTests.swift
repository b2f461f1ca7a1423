import CountdownStore
import Foundation
import Logging
import ServiceLifecycle
import Testing

// The code of the article "Getting started" (CountdownStore.docc/GettingStarted.md) and of the
// README's taste of the library, compiled here so it cannot drift from the API, and run on
// virtual time by the test below.

/// The article's first step. Compiled, not run: it opens a file in the working directory.
func gettingStartedOpen() throws -> CountdownStore {
    let store = try CountdownStore(path: "countdowns.sqlite")
    return store
}

/// The article's other steps, on a store the test hands in. It runs until it is cancelled.
func gettingStarted(_ store: CountdownStore) async throws {
    // A 15-minute payment deadline, under a key of your own.
    try await store.start("order-1042", duration: .seconds(15 * 60), group: "payments")

    // One countdown by key, or the ones that expire soonest.
    let order = try await store.countdown("order-1042")
    print(order?.remaining ?? .zero)  // 900.0 seconds
    let soonest = try await store.active(limit: 10).items
    print(soonest.map(\.key))  // ["order-1042"]

    // The ticker expires each countdown when it comes due and records an event.
    let expiries = try await store.events(.expiries)
    let ticker = CountdownTicker(store: store)
    Task { try await ticker.run() }

    for try await expiry in expiries {
        print("\(expiry.key ?? "") expired")
    }
}

/// The article's `ServiceGroup` form of running the ticker. Compiled, not run.
func gettingStartedServiceGroup(_ store: CountdownStore) async throws {
    let logger = Logger(label: "my-server")
    let ticker = CountdownTicker(store: store)
    let group = ServiceGroup(services: [ticker], gracefulShutdownSignals: [.sigterm], logger: logger)
    try await group.run()
}

@Suite("Article: Getting started")
struct GettingStartedArticleTests {
    @Test("The article's code starts, queries and expires a countdown", .timeLimit(.minutes(5)))
    func theArticleCodeRuns() async throws {
        let clock = VirtualClock()
        let folder = try TemporaryFolder()
        let store = try CountdownStore(path: folder.path(), configuration: .init(clock: clock))
        let started = try await store.events(EventFilter(kinds: [.started]))
        let expiries = try await store.events(.expiries)
        let article = Task { try await gettingStarted(store) }

        for try await _ in started { break }
        #expect(try await store.countdown("order-1042")?.remaining == .seconds(15 * 60))
        #expect(try await store.active(limit: 10).items.map(\.key) == ["order-1042"])
        clock.advance(by: .seconds(15 * 60 - 1))
        #expect(try await store.countdown("order-1042")?.state == .running)
        clock.advance(by: .seconds(1))
        var received: [String] = []
        for try await expiry in expiries {
            received.append(expiry.key ?? "")
            break
        }
        #expect(received == ["order-1042"])
        #expect(try await store.countdown("order-1042")?.state == .expired)
        article.cancel()
        _ = await article.result
        try await store.close()
    }
}
