import Foundation
import HTTPTypes
import Hummingbird
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The code of the article "Cooldowns and debounce", run.
@Suite("Article: Cooldowns and debounce")
struct CooldownsArticleTests {
    /// The article's route, on the host's router.
    static func addResendRoute(
        to router: Router<BasicRequestContext>, store: CountdownStore,
        sendCode: @escaping @Sendable (String) async throws -> Void
    ) {
        router.post("codes/:phone/resend") { _, context -> Response in
            let phone = try context.parameters.require("phone")
            let outcome = try await store.cooldown("resend-code:\(phone)", duration: .seconds(60))
            guard let retryAfter = outcome.retryAfterSeconds else {
                try await sendCode(phone)
                return Response(status: .accepted)
            }
            return Response(status: .tooManyRequests, headers: [.retryAfter: String(retryAfter)])
        }
    }

    @Test("A cooldown in a route: 202, then 429 with Retry-After until the minute is over, over real HTTP")
    func resendRoute() async throws {
        let fixture = try Fixture()
        let store = try await fixture.open()
        let sent = Locked<[String]>([])
        let router = Router()
        Self.addResendRoute(to: router, store: store) { phone in sent.withLock { $0.append(phone) } }
        let port = Locked(0)
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in port.withLock { $0 = channel.localAddress?.port ?? 0 } })
        let serving = Task { try await app.run() }
        defer { serving.cancel() }
        try await eventually("the server listens") { port.withLock { $0 } != 0 }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 15
        let session = URLSession(configuration: configuration)
        func resend() async throws -> (Int, String?) {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port.withLock { $0 })/codes/15550100/resend")!)
            request.httpMethod = "POST"
            let (_, response) = try await session.data(for: request)
            let http = response as? HTTPURLResponse
            return (http?.statusCode ?? 0, http?.value(forHTTPHeaderField: "Retry-After"))
        }

        #expect(try await resend().0 == 202)
        fixture.clock.advance(by: .milliseconds(20_500))
        let refused = try await resend()
        #expect(refused.0 == 429 && refused.1 == "40", "39.5 s left, rounded up: \(refused)")
        #expect(sent.withLock { $0 } == ["15550100"], "one code")
        fixture.clock.advance(by: .milliseconds(39_500))
        #expect(try await resend().0 == 202, "the minute is over")
        #expect(sent.withLock { $0 }.count == 2)
        serving.cancel()
        _ = await serving.result
        try await store.close()
    }

    /// The article's debounced e-mail as the article shows it, both parts together. Compiled, not
    /// run: the tests below run each part where it belongs.
    static func debouncedMailBlock(
        store: CountdownStore, cart: String, sendCartMail: @Sendable (String) async throws -> Void
    ) async throws {
        // At every change of the cart.
        try await store.debounce(
            "cart-mail:\(cart)", quiet: .seconds(300), maxWait: .seconds(1800), group: "cart-mail",
            payload: .text(cart))

        // In the host's worker: one e-mail per burst, never lost across restarts.
        let mailer = try await store.consumer("cart-mailer")
        for try await expiry in try await mailer.events(EventFilter(kinds: [.expired], group: "cart-mail")) {
            if case .text(let cart)? = expiry.payload { try await sendCartMail(cart) }
            try await mailer.acknowledge(expiry)
        }
    }

    /// The article's debounced e-mail: the call at every change.
    static func cartChanged(_ cart: String, store: CountdownStore) async throws {
        // At every change of the cart.
        try await store.debounce(
            "cart-mail:\(cart)", quiet: .seconds(300), maxWait: .seconds(1800), group: "cart-mail",
            payload: .text(cart))
    }

    /// The article's debounced e-mail: the host's worker.
    static func cartMailer(store: CountdownStore, sendCartMail: @Sendable (String) async throws -> Void) async throws {
        // In the host's worker: one e-mail per burst, never lost across restarts.
        let mailer = try await store.consumer("cart-mailer")
        for try await expiry in try await mailer.events(EventFilter(kinds: [.expired], group: "cart-mail")) {
            if case .text(let cart)? = expiry.payload { try await sendCartMail(cart) }
            try await mailer.acknowledge(expiry)
        }
    }

    @Test("A debounced e-mail: one per burst, 5 minutes after the last change or 30 after the first")
    func debouncedMail() async throws {
        let fixture = try Fixture()
        let store = try await fixture.open()
        let running = await RunningTicker(store)
        let mails = Locked<[String]>([])
        let worker = Task { try await Self.cartMailer(store: store) { cart in mails.withLock { $0.append(cart) } } }
        defer { worker.cancel() }

        // Three changes a minute apart, then quiet: one mail, 5 minutes after the last.
        for _ in 0..<3 {
            try await Self.cartChanged("c-7", store: store)
            await running.advance(fixture.clock, by: .seconds(60))
        }
        await running.advance(fixture.clock, by: .seconds(180))
        #expect(mails.withLock { $0 }.isEmpty, "4 minutes after the last change: not yet")
        await running.advance(fixture.clock, by: .seconds(61))
        try await eventually("the mail of the first burst") { mails.withLock { $0 } == ["c-7"] }

        // Changes every 4 minutes for an hour: the mail goes at the 30-minute bound; the next
        // burst's, 5 minutes after its last change.
        for _ in 0..<15 {
            try await Self.cartChanged("c-7", store: store)
            await running.advance(fixture.clock, by: .seconds(240))
        }
        await running.advance(fixture.clock, by: .seconds(60))
        try await eventually("two more mails, one per 30 minutes of changes") { mails.withLock { $0 }.count == 3 }
        let expiries = try await events(store, key: "cart-mail:c-7", kind: "expired")
        #expect(expiries.map(\.generation) == [1, 2, 3])
        worker.cancel()
        _ = await worker.result
        try await running.stop()
        try await store.close()
    }
}
