import CountdownStore
import Foundation
import Logging
import OrdersApp
import ServiceLifecycle
import Testing

/// The service in this process on virtual time, answering a real HTTP client over 127.0.0.1.
/// Time moves only when a test advances the clock; a test waits only for the expiry handler,
/// which runs in a task of its own, and every such wait is bounded.
@Suite("Orders service over HTTP, on virtual time", .timeLimit(.minutes(2)))
struct OrdersServiceTests {
    /// A running service and a client for it.
    final class Running: Sendable {
        let folder: TemporaryFolder
        let clock = VirtualClock()
        let service: OrdersService
        let client: HTTPClient
        private let group: ServiceGroup
        private let task: Task<Void, any Error>

        init(paymentWindow: Duration = .seconds(2), operatorPassword: String? = nil) async throws {
            folder = try TemporaryFolder()
            var configuration = OrdersService.Configuration(databasePath: folder.path("orders.sqlite"))
            configuration.port = 0
            configuration.paymentWindow = paymentWindow
            configuration.countdowns = .init(clock: clock)
            configuration.logger.logLevel = .warning
            configuration.operatorPassword = operatorPassword
            service = try OrdersService(configuration: configuration)
            let (ports, portReport) = AsyncStream.makeStream(of: Int.self)
            group = service.serviceGroup(gracefulShutdownSignals: []) { port in portReport.yield(port) }
            task = Task { [group] in try await group.run() }
            let port = try await withThrowingTaskGroup(of: Int?.self) { waits in
                waits.addTask { await ports.first { _ in true } }
                waits.addTask {
                    try await Task.sleep(for: .seconds(30))
                    return nil
                }
                defer { waits.cancelAll() }
                return try await waits.next() ?? nil
            }
            client = HTTPClient(port: try #require(port, "the server did not start within 30 s"))
            await service.ticker.waitUntilIdle()
        }

        /// Moves virtual time and waits until the ticker has handled what came due.
        func advance(by duration: Duration) async {
            clock.advance(by: duration)
            await service.ticker.waitUntilIdle()
        }

        /// Stops the group as SIGTERM would, then closes the store as the program does.
        func stop() async throws {
            await group.triggerGracefulShutdown()
            try await task.value
            try await service.shutDown()
        }

        /// Places an order and returns its id.
        func place(_ item: String = "book", windowMs: Int? = nil) async throws -> String {
            let window = windowMs.map { #", "payment_window_ms": \#($0)"# } ?? ""
            let reply = try await client.post("/orders", #"{"item": "\#(item)", "amount_cents": 1200\#(window)}"#)
            #expect(reply.status == 201, "\(reply.json)")
            return try #require(reply.string("order", "id"))
        }
    }

    @Test("The countdowns' dashboard is mounted behind the operators' password; the metrics count the orders' countdowns")
    func dashboardAndMetrics() async throws {
        let service = try await Running(operatorPassword: "s3cret")
        let client = service.client
        let order = try await service.place()
        let operators = ["Authorization": "Basic " + Data("ops:s3cret".utf8).base64EncodedString()]

        // A refusal carries a Basic challenge, which URLSession on Linux does not hand back: curl reads it.
        #expect(try curlStatus(port: client.port, "/countdowns/api/countdowns") == 401, "the host's middleware stands in front")
        #expect(try curlStatus(port: client.port, "/countdowns/api/countdowns", user: "ops:guess") == 401)
        #expect(try curlStatus(port: client.port, "/countdowns/api/countdowns", user: "ops:s3cret") == 200)
        let page = try await client.text("GET", "/countdowns/", headers: operators)
        #expect(page.status == 200 && page.body.contains("dashboard.js"))
        let listed = try await client.text("GET", "/countdowns/api/countdowns?group=payments", headers: operators)
        #expect(listed.status == 200 && listed.body.contains("\"key\":\"order-\(order)\""), "\(listed.body)")
        // Past the password the dashboard may change countdowns: the host decides who gets there.
        // A write is JSON, with a body or without one: a cross-site form cannot send it.
        let form = try await client.text(
            "POST", "/countdowns/api/countdowns/order-\(order)/pause", headers: operators.merging(["Content-Type": "text/plain"]) { $1 })
        #expect(form.status == 415, "\(form.body)")
        let paused = try await client.text(
            "POST", "/countdowns/api/countdowns/order-\(order)/pause", headers: operators.merging(["Content-Type": "application/json"]) { $1 })
        #expect(paused.status == 200 && paused.body.contains("\"state\":\"paused\""), "\(paused.body)")

        let metrics = try await client.text("GET", "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.body.contains(#"countdown_items_started_total{policy="wall"} 1"#), "\(metrics.body)")
        #expect(metrics.body.contains(#"countdown_items_paused_total{policy="wall"} 1"#))
        try await service.stop()
    }

    @Test("An order gets a payment deadline; a payment before it wins, an expiry after it closes the order once")
    func orderLifecycle() async throws {
        let service = try await Running()
        let client = service.client

        let placed = try await client.post("/orders", #"{"item": "book", "amount_cents": 1200}"#)
        #expect(placed.status == 201)
        let unpaid = try #require(placed.string("order", "id"))
        #expect(placed.headers["location"] == "/orders/\(unpaid)")
        #expect(placed.string("order", "status") == "awaiting_payment")
        #expect(placed.string("countdown", "key") == "order-\(unpaid)")
        #expect(placed.string("countdown", "group") == "payments")
        #expect(placed.string("countdown", "state") == "running")
        #expect(placed.int("countdown", "duration_ms") == 2000)
        #expect(placed.int("countdown", "remaining_ms") == 2000)
        let startedAt = try #require(placed.string("countdown", "started_at"))
        #expect(placed.string("order", "created_at") == startedAt)

        // The countdown route returns the library's own encoding, field for field.
        let countdown = try await client.get("/orders/\(unpaid)/countdown")
        #expect(countdown.status == 200)
        let fromLibrary = try await service.service.store.countdown("order-\(unpaid)")
        let libraryJSON = try JSONSerialization.jsonObject(with: JSONEncoder().encode(fromLibrary)) as? NSDictionary
        #expect(libraryJSON == countdown.json as NSDictionary)

        // A payment before the deadline cancels the countdown and marks the order paid; a second
        // payment is refused with the store's code.
        let paid = try await service.place("pen")
        let payment = try await client.post("/orders/\(paid)/pay")
        #expect(payment.status == 200, "\(payment.json)")
        #expect(payment.string("order", "status") == "paid")
        #expect(payment.string("countdown", "state") == "cancelled")
        let again = try await client.post("/orders/\(paid)/pay")
        #expect(again.status == 409)
        #expect(again.string("error", "code") == "wrongState")
        #expect(again.string("order", "status") == "paid")

        // One millisecond before the deadline the order is still open.
        await service.advance(by: .milliseconds(1999))
        #expect(try await client.get("/orders/\(unpaid)").string("countdown", "state") == "running")
        #expect(try await client.get("/orders/\(unpaid)").int("countdown", "remaining_ms") == 1)
        await service.advance(by: .milliseconds(1))
        // Every reader sees the expiry at once; the handler closes the order when it gets the event.
        #expect(try await client.get("/orders/\(unpaid)").string("countdown", "state") == "expired")
        try await eventually("the expired order is closed") {
            try await client.get("/orders/\(unpaid)").string("order", "status") == "expired"
        }
        let expired = try await client.get("/orders/\(unpaid)")
        let deadline = try #require(expired.string("countdown", "deadline_at"))
        #expect(expired.string("order", "closed_at") == deadline, "closed at the deadline on the store's clock")
        #expect(expired.int("order", "closing_event_id") != nil)

        // Too late: the payment is refused with the order and its expired countdown.
        let late = try await client.post("/orders/\(unpaid)/pay")
        #expect(late.status == 409)
        #expect(late.string("error", "code") == "wrongState")
        #expect(late.string("error", "message")?.contains("order-\(unpaid)") == true, "\(late.json)")
        #expect(late.string("countdown", "state") == "expired")

        // The payment's own event reaches the handler too, once.
        try await eventually("the payment's event is handled") {
            try await client.get("/orders/\(paid)").int("order", "closing_event_id") != nil
        }
        #expect(try await client.get("/orders/\(paid)").string("order", "status") == "paid")

        #expect(try await client.get("/orders/nope").status == 404)
        #expect(try await client.post("/orders/nope/pay").status == 404)
        #expect(try await client.get("/orders/nope/countdown").status == 404)
        try await service.stop()
    }

    @Test("A list says whether it was cut, and its cursor walks every order once")
    func pagedList() async throws {
        let service = try await Running()
        let client = service.client
        var placed: [String] = []
        for seconds in [50, 10, 40, 20, 30] {
            placed.append(try await service.place(windowMs: seconds * 1000))
        }
        let soonestFirst = [1, 3, 4, 2, 0].map { placed[$0] }

        var walked: [String] = []
        var after: String?
        var pages = 0
        repeat {
            let page = try await client.get("/orders?limit=2" + (after.map { "&after=\($0)" } ?? ""))
            #expect(page.status == 200, "\(page.json)")
            walked += page.objects("items").compactMap { ($0["order"] as? [String: Any])?["id"] as? String }
            after = page.string("next")
            pages += 1
        } while after != nil && pages < 10
        #expect(walked == soonestFirst)

        let first = try await client.get("/orders?limit=2")
        #expect(first.objects("items").count == 2)
        #expect(first.string("next") != nil, "a cut list says so")
        let whole = try await client.get("/orders?limit=10")
        #expect(whole.objects("items").count == 5)
        #expect(whole.string("next") == nil, "a whole list says so")

        // A cursor continues only the list it came from.
        let cursor = try #require(first.string("next"))
        let wrongList = try await client.get("/orders?state=expired&after=\(cursor)")
        #expect(wrongList.status == 400)
        #expect(wrongList.string("error", "code") == "invalidArgument")

        await service.advance(by: .seconds(10))
        let expired = try await client.get("/orders?state=expired")
        #expect(expired.objects("items").compactMap { ($0["order"] as? [String: Any])?["id"] as? String } == [placed[1]])
        try await service.stop()
    }

    @Test("Bad input gets a 400 that names the value, and changes nothing")
    func badInput() async throws {
        let service = try await Running()
        let client = service.client
        let refusals: [(reply: HTTPClient.Reply, names: String)] = [
            (try await client.get("/orders?limit=0"), "invalid limit 0"),
            (try await client.get("/orders?limit=20000"), "invalid limit 20000"),
            (try await client.get("/orders?limit=ten"), "invalid limit \"ten\""),
            (try await client.get("/orders?state=soon"), "invalid state \"soon\""),
            (try await client.get("/orders?after=bm90IGEgY3Vyc29y"), "invalid cursor \"bm90IGEgY3Vyc29y\""),
            (try await client.post("/orders", #"{"item": "book", "amount_cents": 1200, "payment_window_ms": 0}"#), "invalid duration"),
            (try await client.post("/orders", #"{"item": " ", "amount_cents": 1200}"#), "invalid item \" \""),
            (try await client.post("/orders", #"{"item": "book", "amount_cents": -5}"#), "invalid amount_cents -5"),
        ]
        for (reply, names) in refusals {
            #expect(reply.status == 400, "\(names): \(reply.json)")
            #expect(reply.string("error", "message")?.contains(names) == true, "\(names): \(reply.json)")
        }
        #expect(refusals[0].reply.string("error", "code") == "invalidArgument")
        #expect(refusals[5].reply.string("error", "code") == "invalidDuration")
        #expect(try await client.post("/orders", #"{"item": "book""#).status == 400, "malformed JSON")
        #expect(try await client.post("/orders", #"{"item": "book"}"#).status == 400, "a missing field")

        // Nothing was written: no countdown, no order.
        #expect(try await service.service.store.list(.all, limit: 10).isEmpty)
        #expect(try await client.get("/orders?state=all").objects("items").isEmpty)
        try await service.stop()
    }
}

/// The status curl gets for `path` on 127.0.0.1 (with basic authentication as `user`), at most 10 s.
func curlStatus(port: Int, _ path: String, user: String? = nil) throws -> Int {
    let curl = Process()
    curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
    curl.arguments = ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10"]
        + (user.map { ["-u", $0] } ?? []) + ["http://127.0.0.1:\(port)\(path)"]
    let output = Pipe()
    curl.standardOutput = output
    try curl.run()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    curl.waitUntilExit()
    return Int(text) ?? 0
}
