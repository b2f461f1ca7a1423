@testable import CountdownStoreCore
@testable import CountdownStoreSQLite
import CountdownStoreLocation
import Foundation
import Logging
import ServiceLifecycle
import Testing

// The examples of the library's doc comments, compiled here so they cannot drift from the API
// (`.ci/check_docs.py` checks that each one appears in this folder), and run where they can be.

/// `CountdownStore`'s example. Compiled, not run: it opens a file in the working directory.
func countdownStoreExample() async throws {
    let store = try CountdownStore(path: "countdowns.sqlite")
    try await store.start("order-1042", duration: .seconds(15 * 60), group: "payments")
    let item = try await store.countdown("order-1042")   // remaining ≈ 15 min
    _ = item
}

/// `StoreLocation`'s example. Compiled, not run: it opens a file in the working directory, or the
/// database `COUNTDOWN_DB` names.
func storeLocationExample() async throws {
    let location = StoreLocation(ProcessInfo.processInfo.environment["COUNTDOWN_DB"] ?? "countdowns.sqlite")
    let store = try await CountdownStore(location: location)
    print("opened \(location)")   // a connection string without its password
    try await store.close()
}

/// `CountdownTicker`'s example, beside a service of the host's. Compiled, not run.
func countdownTickerExample(store: CountdownStore, myServer: some Service, logger: Logger) async throws {
    let ticker = CountdownTicker(store: store)
    let group = ServiceGroup(services: [ticker, myServer], logger: logger)
    try await group.run()        // or: try await ticker.run() in a task you cancel
}

/// `EventConsumer`'s example, in a host type whose `sendReminder(for:)` records what it sent.
struct ReminderMailer {
    let store: CountdownStore
    let sent: Locked<[String]>

    func sendReminder(for expiry: CountdownEvent) async throws {
        sent.withLock { $0.append(expiry.key ?? "") }
    }

    func run() async throws {
        let mailer = try await store.consumer("mailer")
        for try await expiry in try await mailer.events(.expiries) {
            try await sendReminder(for: expiry)
            try await mailer.acknowledge(expiry)   // not delivered again, even after a restart
        }
    }
}

/// `CountdownError`'s first example: a direct call, caught typed.
func countdownErrorTypedExample(store: CountdownStore) async {
    do {
        try await store.pause("order-1042")
    } catch {
        print(error.code, error.message)  // error is a CountdownError here
    }
}

/// `CountdownError`'s second example: in a closure that throws `any Error`, matched by type.
func countdownErrorClosureExample(store: CountdownStore) -> @Sendable () async throws -> String {
    let refusal: @Sendable () async throws -> String = {
        do {
            return try await store.pause("order-1042").key
        } catch let error as CountdownError where error.code == .wrongState {
            return "already over: \(error.message)"
        }
    }
    return refusal
}

/// The example of `CountdownStore.list(_:group:limit:after:)`: every item, a page at a time.
func listPagesExample(store: CountdownStore) async throws {
    var cursor: ListCursor?
    repeat {
        let page = try await store.list(.all, limit: 1000, after: cursor)
        for item in page.items { print(item.key) }
        cursor = page.next
    } while cursor != nil
}

/// `VirtualClock`'s example, on a store in `path`; returns the countdown as it stands at the end.
func virtualClockExample(path: String) async throws -> Countdown? {
    let clock = VirtualClock()
    let store = try CountdownStore(path: path, configuration: .init(clock: clock))
    try await store.start("otp", duration: .seconds(30))
    clock.advance(by: .seconds(10))              // 10 s pass on every clock
    clock.moveSystemClock(by: .seconds(-3600))   // someone sets the wall clock back an hour
    let otp = try await store.countdown("otp")   // remaining: 20 s; the edit changed nothing
    try await store.close()
    return otp
}

@Suite("Doc comment examples")
struct DocCommentExamplesTests {
    @Test("VirtualClock's example: 10 s pass, the wall clock is set back an hour, 20 s remain")
    func virtualClockExampleRuns() async throws {
        let folder = try TemporaryFolder()
        let otp = try #require(try await virtualClockExample(path: folder.path()))
        #expect(otp.state == .running)
        #expect(otp.remaining == .seconds(20))
    }

    @Test("CountdownError's examples catch a refusal typed, and in a closure by matching the type")
    func countdownErrorExamplesRun() async throws {
        let fixture = try Fixture()
        let store = try await fixture.open()
        try await store.start("order-1042", duration: .seconds(1))
        fixture.clock.advance(by: .seconds(2))
        await countdownErrorTypedExample(store: store)
        #expect(try await countdownErrorClosureExample(store: store)() == "already over: cannot pause 'order-1042': it has expired")
    }

    @Test("list(_:group:limit:after:)'s example walks every page")
    func listPagesExampleRuns() async throws {
        let fixture = try Fixture()
        let store = try await fixture.open()
        try await store.start((0..<1001).map { .countdown("k\($0)", duration: .seconds(60)) })
        try await listPagesExample(store: store)
        var seen = 0
        var cursor: ListCursor?
        repeat {
            let page = try await store.list(.all, limit: 1000, after: cursor)
            seen += page.items.count
            cursor = page.next
        } while cursor != nil
        #expect(seen == 1001)
    }

    @Test("EventConsumer's example hands each expiry over once and acknowledges it")
    func eventConsumerExampleRuns() async throws {
        let fixture = try Fixture()
        let store = try await fixture.open()
        try await store.start("renewal", duration: .seconds(5))
        fixture.clock.advance(by: .seconds(5))
        #expect(try await store.expireDue().map(\.key) == ["renewal"])
        let sent = Locked<[String]>([])
        let mailer = Task { try await ReminderMailer(store: store, sent: sent).run() }
        let consumer = try await store.consumer("mailer")
        while try await consumer.acknowledgedThrough() == 0 { await Task.yield() }
        mailer.cancel()
        _ = await mailer.result
        #expect(sent.withLock { $0 } == ["renewal"])
        #expect(try await consumer.acknowledgedThrough() == store.recentEvents(kinds: [.expired], limit: 1).first?.id)
        try await store.close()
    }
}

/// A host's refusal of a request made too soon, for `CooldownOutcome`'s example.
struct TooManyRequests: Error {
    let retryAfter: Duration
}

/// `CooldownOutcome`'s example: a verification code sent at most once a minute per phone.
func cooldownOutcomeExample(store: CountdownStore, phone: String, sendCode: (String) async throws -> Void) async throws {
    switch try await store.cooldown("resend-code:\(phone)", duration: .seconds(60)) {
    case .allowed:
        try await sendCode(phone)
    case .coolingDown(let remaining, _, _):
        throw TooManyRequests(retryAfter: remaining)
    }
}

/// `debounce`'s example. Compiled, not run.
func debounceExample(store: CountdownStore, cart: String) async throws {
    // One "your cart changed" e-mail, 5 minutes after the last change, never more than 30
    // after the first.
    try await store.debounce(
        "cart-mail:\(cart)", quiet: .seconds(300), maxWait: .seconds(1800), payload: .text(cart))
}

/// `CountdownAction`'s example. Compiled, not run.
func countdownActionExample(store: CountdownStore, item: Countdown) async throws {
    for action in CountdownAction.allCases where action.applies(to: item) {
        print(action.name, action.takesDuration ? "DURATION" : "")
    }
    try await CountdownAction.extend.perform(on: store, key: "order-1042", by: .seconds(60))
}

/// `CountdownError.message(hint:)`'s example: the message in the words of a tool.
func countdownErrorHintExample(error: CountdownError) -> String {
    let line = error.message(hint: { hint in
        hint == .startWhenActive(.replace) ? "use countdown start --replace" : nil
    })
    return line
}
