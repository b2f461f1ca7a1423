import CountdownStore
import CountdownStoreServer
import Foundation
import Hummingbird
import Logging
import Prometheus
import ServiceLifecycle
import UnixSignals

/// An HTTP service that gives every order a payment deadline.
///
/// One GRDB database holds the service's `orders` table and the countdowns. One `ServiceGroup`
/// runs the countdown ticker, the handler that closes orders on their countdowns' events, and the
/// HTTP server; a graceful shutdown stops them in the reverse order, the ticker last. The
/// countdowns' dashboard is mounted at `/countdowns/` behind the operators' password, and the
/// metrics are served in Prometheus text at `/metrics`.
public struct OrdersService: Sendable {
    /// How the service runs.
    public struct Configuration: Sendable {
        /// The database file of orders and countdowns; its folder must exist.
        public var databasePath: String
        /// The address to listen on.
        public var hostname = "127.0.0.1"
        /// The port to listen on; 0 picks a free one (see `onServerRunning`).
        public var port = 8080
        /// How long a new order may wait for its payment, unless the request says otherwise.
        public var paymentWindow: Duration = .seconds(15 * 60)
        /// The countdown store's settings (its clock and logger among them).
        public var countdowns = CountdownStore.Configuration()
        /// The service's logger.
        public var logger = Logger(label: "orders-service")
        /// The password of the operators (HTTP basic authentication, any user name): with one, the
        /// dashboard at `/countdowns/` may change countdowns; without, it is read-only.
        public var operatorPassword: String?
        /// Where the service's metrics, the countdowns' among them, are collected for `/metrics`.
        public var metrics = PrometheusCollectorRegistry()

        /// A configuration with the database at `databasePath` and every other setting as default.
        public init(databasePath: String) {
            self.databasePath = databasePath
        }
    }

    /// The group of every payment countdown.
    public static let paymentGroup = "payments"

    /// The service's settings.
    public let configuration: Configuration
    /// The service's own tables.
    public let orders: OrderBook
    /// The countdowns, in the same database.
    public let store: CountdownStore
    /// The one ticker of the store.
    public let ticker: CountdownTicker
    /// The countdowns' dashboard and API, mounted at `/countdowns/`.
    public let dashboard: CountdownDashboard

    /// Opens the database and the store; nothing runs until ``run(gracefulShutdownSignals:onServerRunning:)``.
    public init(configuration: Configuration) throws {
        self.configuration = configuration
        orders = try OrderBook(path: configuration.databasePath)
        var countdowns = configuration.countdowns
        if countdowns.metrics.factory == nil {
            countdowns.metrics.factory = PrometheusMetricsFactory(registry: configuration.metrics)
        }
        store = try CountdownStore(database: orders.database, configuration: countdowns)
        ticker = CountdownTicker(store: store)
        dashboard = CountdownDashboard(store: store, writeAccess: configuration.operatorPassword == nil ? .readOnly : .open)
    }

    /// The HTTP application: the routes of ``OrderRoutes`` on the configured address.
    func application(onServerRunning: @escaping @Sendable (Int) async -> Void) -> some ApplicationProtocol {
        let router = Router(context: OrdersRequestContext.self)
        OrderRoutes(store: store, orders: orders, paymentWindow: configuration.paymentWindow).add(to: router)
        // The countdowns' dashboard, behind the operators' password when there is one.
        let countdowns = router.group("countdowns")
        if let password = configuration.operatorPassword {
            dashboard.addRoutes(to: countdowns.add(middleware: OperatorsOnly(password: password)))
        } else {
            dashboard.addRoutes(to: countdowns)
        }
        let registry = configuration.metrics
        router.get("metrics") { _, _ in
            var text = [UInt8]()
            registry.emit(into: &text)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: text)))
        }
        return Application(
            router: router,
            configuration: .init(address: .hostname(configuration.hostname, port: configuration.port)),
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
            logger: configuration.logger)
    }

    /// The ticker, the order closer and the HTTP server in one group. The group stops its services
    /// last to first: the server stops taking requests, the closer finishes the event in hand, and
    /// the ticker writes its final heartbeat and frees the lease.
    public func serviceGroup(
        gracefulShutdownSignals: [UnixSignal] = [.sigterm, .sigint],
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> ServiceGroup {
        ServiceGroup(
            services: [
                ticker,
                OrderCloser(store: store, orders: orders, logger: configuration.logger),
                application(onServerRunning: onServerRunning),
                // Stopped first: the dashboard's open event streams end, so the server can stop.
                DashboardStreams(dashboard: dashboard),
            ],
            gracefulShutdownSignals: gracefulShutdownSignals,
            logger: configuration.logger)
    }

    /// Runs the service until SIGTERM or SIGINT, then closes the store.
    public func run(onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        try await serviceGroup(onServerRunning: onServerRunning).run()
        try await shutDown()
    }

    /// What the host does after its group has stopped. The database is shared, so `close()` only
    /// frees the store's lease; folding the write-ahead log back in, after that last write, and
    /// closing the database are the host's to do.
    public func shutDown() async throws {
        try await store.close()
        _ = try await store.checkpointWAL()
        try orders.database.close()
    }
}

/// Ends the dashboard's event streams once a graceful shutdown begins.
struct DashboardStreams: Service {
    let dashboard: CountdownDashboard

    func run() async throws {
        try? await gracefulShutdown()
        dashboard.stopStreams()
    }
}

/// The operators' door to the dashboard: HTTP basic authentication with their password (a
/// browser asks for it once and sends it with every request of the page).
struct OperatorsOnly<Context: RequestContext>: RouterMiddleware {
    let password: String

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let given = request.headers[.authorization].flatMap { header -> String? in
            guard header.hasPrefix("Basic "), let data = Data(base64Encoded: String(header.dropFirst(6))) else { return nil }
            return String(decoding: data, as: UTF8.self).split(separator: ":", maxSplits: 1).dropFirst().first.map(String.init)
        }
        guard let given, Self.same(given, password) else {
            return Response(status: .unauthorized, headers: [.wwwAuthenticate: "Basic realm=\"countdowns\""])
        }
        return try await next(request, context)
    }

    /// Whether the two are equal, in a time that depends on their lengths only.
    static func same(_ given: String, _ expected: String) -> Bool {
        let (left, right) = (Array(given.utf8), Array(expected.utf8))
        var difference = left.count ^ right.count
        for index in 0..<max(left.count, right.count) {
            difference |= Int((index < left.count ? left[index] : 0) ^ (index < right.count ? right[index] : 0))
        }
        return difference == 0
    }
}

/// The request context of every route: JSON dates with milliseconds, as the countdowns have them.
public struct OrdersRequestContext: RequestContext {
    /// Hummingbird's storage for the request.
    public var coreContext: CoreRequestContextStorage

    /// A context for one request.
    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
    }

    /// Encodes dates as ISO-8601 with milliseconds, like `Countdown`'s own fields, keys sorted.
    public var responseEncoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(StoreTime.iso8601(date))
        }
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }
}
