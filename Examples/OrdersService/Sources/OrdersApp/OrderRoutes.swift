import CountdownStore
import Foundation
import Hummingbird

// A countdown is `Codable` with the fields of `countdown show --json`: this one line lets a
// route return it as its JSON response.
extension Countdown: @retroactive ResponseEncodable {}

/// The body of `POST /orders`.
struct NewOrder: Decodable {
    var item: String
    var amountCents: Int
    /// How long the order may wait for its payment; the service's payment window when absent.
    var paymentWindowMs: Int64?

    enum CodingKeys: String, CodingKey {
        case item, amountCents = "amount_cents", paymentWindowMs = "payment_window_ms"
    }
}

/// An order with its payment countdown (`nil` once the countdown was pruned, or for an order
/// whose countdown was never started).
struct OrderView: ResponseEncodable {
    var order: Order?
    var countdown: Countdown?
}

/// One page of `GET /orders`: `next` is the `after` of the next page, `null` on the last one.
struct OrderPage: ResponseEncodable {
    var items: [OrderView]
    var next: String?
}

/// The routes of the service.
///
/// - `POST /orders` `{"item": "…", "amount_cents": 1200}`: places an order and starts its payment
///   countdown (`201`, the order and its countdown).
/// - `GET /orders/{id}`: the order and its countdown.
/// - `GET /orders/{id}/countdown`: the countdown alone, exactly as `countdown show --json` prints it.
/// - `POST /orders/{id}/pay`: cancels the countdown and marks the order paid; `409` when the
///   deadline has passed (or the order was paid already).
/// - `GET /orders?state=active|expired|cancelled|all&limit=N&after=CURSOR`: the orders by their
///   countdowns, a page at a time.
///
/// Every `CountdownError` becomes a JSON error with its code (``CountdownErrorMiddleware``).
struct OrderRoutes: Sendable {
    let store: CountdownStore
    let orders: OrderBook
    let paymentWindow: Duration

    func add(to router: Router<OrdersRequestContext>) {
        router.addMiddleware { CountdownErrorMiddleware() }
        router.post("orders", use: place)
        router.get("orders", use: list)
        router.get("orders/:id", use: show)
        router.get("orders/:id/countdown") { _, context -> Countdown in
            guard let countdown = try await store.countdown(Order.countdownKey(try orderID(context))) else {
                throw HTTPError(.notFound, message: "no countdown for that order")
            }
            return countdown
        }
        router.post("orders/:id/pay", use: pay)
    }

    @Sendable func place(_ request: Request, context: OrdersRequestContext) async throws -> EditedResponse<OrderView> {
        let new = try await request.decode(as: NewOrder.self, context: context)
        let item = new.item.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !item.isEmpty, item.count <= 200 else {
            throw HTTPError(.badRequest, message: "invalid item \"\(new.item)\": must be 1 to 200 characters")
        }
        guard new.amountCents > 0 else {
            throw HTTPError(.badRequest, message: "invalid amount_cents \(new.amountCents): must be positive")
        }
        let id = String(UUID().uuidString.prefix(8)).lowercased()
        // The order and its deadline in one transaction: no order without a deadline, no
        // deadline without an order. A window out of range is a 400 from the middleware.
        let (order, countdown) = try await orders.place(
            id: id, item: item, amountCents: new.amountCents,
            paymentWindow: new.paymentWindowMs.map { .milliseconds($0) } ?? paymentWindow, in: store)
        return EditedResponse(
            status: .created, headers: [.location: "/orders/\(id)"],
            response: OrderView(order: order, countdown: countdown))
    }

    @Sendable func show(_ request: Request, context: OrdersRequestContext) async throws -> OrderView {
        let id = try orderID(context)
        guard let order = try await orders.order(id) else {
            throw HTTPError(.notFound, message: "no order \"\(id)\"")
        }
        return OrderView(order: order, countdown: try await store.countdown(order.countdownKey))
    }

    @Sendable func pay(_ request: Request, context: OrdersRequestContext) async throws -> EditedResponse<OrderView> {
        let id = try orderID(context)
        guard try await orders.order(id) != nil else {
            throw HTTPError(.notFound, message: "no order \"\(id)\"")
        }
        do {
            // The countdown cancelled and the order marked paid in one transaction; the closer
            // acknowledges the `cancelled` event when it comes.
            let cancelled = try await orders.pay(id, in: store)
            return EditedResponse(status: .ok, response: OrderView(order: try await orders.order(id), countdown: cancelled))
        } catch let error as CountdownError where error.code == .wrongState {
            // Too late (expired) or paid already: say so with the order as it stands.
            let current = OrderView(order: try await orders.order(id), countdown: try await store.countdown(Order.countdownKey(id)))
            throw PaymentRefused(reason: error, current: current)
        }
    }

    @Sendable func list(_ request: Request, context: OrdersRequestContext) async throws -> OrderPage {
        let query = request.uri.queryParameters
        let state = try query.get("state").map { text in
            guard let state = StateFilter(rawValue: String(text)) else {
                throw HTTPError(.badRequest, message: "invalid state \"\(text)\": must be one of \(StateFilter.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            return state
        } ?? .active
        let limit = try query.get("limit").map { text in
            guard let limit = Int(text) else { throw HTTPError(.badRequest, message: "invalid limit \"\(text)\": not a whole number") }
            return limit
        } ?? 100
        let cursor = try query.get("after").map(Self.cursor(from:))
        // The store checks the limit (1 to 10,000) and that the cursor continues this list.
        let page = try await store.list(state, group: OrdersService.paymentGroup, limit: limit, after: cursor)
        let found = try await orders.orders(page.items.compactMap { Order.id(fromCountdownKey: $0.key) })
        return OrderPage(
            items: page.items.map { OrderView(order: Order.id(fromCountdownKey: $0.key).flatMap { found[$0] }, countdown: $0) },
            next: try page.next.map(Self.token(for:)))
    }

    private func orderID(_ context: OrdersRequestContext) throws -> String {
        try context.parameters.require("id")
    }

    /// A cursor as an opaque token for a query string: its JSON, base64url-encoded.
    static func token(for cursor: ListCursor) throws -> String {
        try JSONEncoder().encode(cursor).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The cursor of a token made by ``token(for:)``.
    static func cursor(from token: String) throws -> ListCursor {
        var base64 = token.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64), let cursor = try? JSONDecoder().decode(ListCursor.self, from: data) else {
            throw HTTPError(.badRequest, message: "invalid cursor \"\(token.prefix(40))\": pass back the next of a page unchanged")
        }
        return cursor
    }
}

/// A payment that came too late or twice: `409` with the reason and the order as it stands.
struct PaymentRefused: Error {
    let reason: CountdownError
    let current: OrderView
}

/// Turns a `CountdownError` (and a refused payment) into a JSON error response:
/// `{"error": {"code": "wrongState", "message": "…"}}`, with the status its code calls for.
struct CountdownErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    /// The error body.
    struct ErrorBody: Encodable {
        struct Detail: Encodable {
            var code: String
            var message: String
        }
        var error: Detail
        var order: Order?
        var countdown: Countdown?
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let refusal as PaymentRefused {
            let body = ErrorBody(
                error: .init(code: refusal.reason.code.name, message: refusal.reason.message),
                order: refusal.current.order, countdown: refusal.current.countdown)
            return try respond(.conflict, body, request, context)
        } catch let error as CountdownError {
            let status = Self.status(for: error.code)
            // A storage failure names the file and what SQLite said: log it, do not send it.
            let message = status.code >= 500 ? "the order database failed (\(error.code.name))" : error.message
            if status.code >= 500 {
                context.logger.error("countdown store failed", metadata: ["error": "\(error)", "underlying": "\(error.underlyingError.map { "\($0)" } ?? "-")"])
            }
            return try respond(status, ErrorBody(error: .init(code: error.code.name, message: message)), request, context)
        }
    }

    /// The status for a countdown error, by its code rather than its message.
    static func status(for code: CountdownError.Code) -> HTTPResponse.Status {
        switch code.category {
        case .invalidInput: .badRequest
        case .notFound: .notFound
        case .conflict: .conflict
        case .storage: code == .databaseBusy ? .serviceUnavailable : .internalServerError
        }
    }

    private func respond(_ status: HTTPResponse.Status, _ body: ErrorBody, _ request: Request, _ context: Context) throws -> Response {
        var response = try context.responseEncoder.encode(body, from: request, context: context)
        response.status = status
        return response
    }
}
