import CountdownStoreCore
import Hummingbird
import Logging
import Prometheus

/// A store's live dashboard and HTTP API, as routes a host adds to its own Hummingbird router,
/// under a path of its choosing and behind its own middleware.
///
/// ```swift
/// let dashboard = CountdownDashboard(store: store, writeAccess: .open, allowedHosts: .names(["ops.example.com"]))
/// let operators = router.group("countdowns").add(middleware: OperatorsOnly())
/// dashboard.addRoutes(to: operators)
/// ```
///
/// The page is then at `/countdowns/` and the API at `/countdowns/api/…`.
///
/// `countdown serve` runs the same routes at the root of a server of its own. The article
/// "Watching a store" lists every route, its JSON and its errors.
public struct CountdownDashboard: Sendable {
    /// Who may change the store through the API (every read is open to whoever reaches the routes).
    public enum WriteAccess: Sendable {
        /// No write: every one answers 401 (`readOnly`).
        case readOnly
        /// A write must present `Authorization: Bearer TOKEN`, compared in constant time; the
        /// token is never logged nor shown by `description`. A token shorter than
        /// ``minimumTokenLength`` is too easily guessed to guard anything: every write is then
        /// refused (401), and the refusal says why.
        case bearerToken(String)
        /// Every request that reaches the routes may write: the host's own middleware in front
        /// of them decides who does.
        case open
    }

    /// The shortest bearer token that allows writes: 16 characters.
    public static let minimumTokenLength = 16

    /// The store shown and changed.
    public let store: CountdownStore
    /// Who may change it.
    public let writeAccess: WriteAccess
    /// Where `GET metrics` reads the Prometheus text from; `nil`: no `metrics` route (a host
    /// serves its metrics itself).
    public let metricsRegistry: PrometheusCollectorRegistry?
    /// The names answered, in the request's `Host`; any other is refused with 421.
    public let allowedHosts: AllowedHosts
    /// The origins (`https://ops.example.com`) whose pages may write besides the dashboard's own,
    /// as a CORS policy in front allows them; a write from any other origin is refused with 403.
    public let allowedOrigins: Set<String>
    /// Where a request that failed on the server is recorded, with the reference its answer gives.
    public let logger: Logger
    /// The one reader of the store's events that feeds every open event stream.
    let hub: EventHub

    /// A dashboard of `store`.
    ///
    /// - Parameters:
    ///   - store: the store to show.
    ///   - writeAccess: who may change it; by default nobody.
    ///   - metricsRegistry: the registry whose metrics `GET metrics` serves, if any.
    ///   - allowedHosts: the names answered besides the loopback names and numeric addresses:
    ///     the public name of a host that serves the dashboard (`.names(["ops.example.com"])`),
    ///     or `.any` where the host's own middleware checks `Host`.
    ///   - allowedOrigins: other origins whose pages may write, when a CORS policy lets them.
    ///   - logger: where requests that failed on the server are recorded.
    ///   - maximumStreams: the most event streams open at once; beyond, `api/stream` answers 503.
    ///   - streamBufferBytes: the most bytes of events one stream holds for a client that is
    ///     slow to read them; a client further behind is dropped (a page reconnects and reloads).
    public init(
        store: CountdownStore, writeAccess: WriteAccess = .readOnly,
        metricsRegistry: PrometheusCollectorRegistry? = nil,
        allowedHosts: AllowedHosts = .loopback, allowedOrigins: Set<String> = [],
        logger: Logger = Logger(label: "CountdownDashboard"), maximumStreams: Int = 256,
        streamBufferBytes: Int = 256 * 1024
    ) {
        self.logger = logger
        self.hub = EventHub(store: store, capacity: max(1, maximumStreams), bufferBytes: max(4096, streamBufferBytes))
        self.store = store
        self.writeAccess = writeAccess
        self.metricsRegistry = metricsRegistry
        self.allowedHosts = allowedHosts
        self.allowedOrigins = allowedOrigins
    }

    /// Adds the page (`""`, then `dashboard-actions.js`, `dashboard.js` and `dashboard.css`), the
    /// API (`api/…`), the event stream (`api/stream`), `healthz` and, with a registry, `metrics`
    /// to `router`: a router or a group of one.
    public func addRoutes<Context: RequestContext>(to router: some RouterMethods<Context>) {
        APIRoutes<Context>(dashboard: self).add(to: router)
    }

    /// Ends the open event streams, so that a server shutting down is not held back by them.
    public func stopStreams() {
        hub.finishAll(stopping: true)
    }
}

extension CountdownDashboard.WriteAccess: CustomStringConvertible, CustomDebugStringConvertible {
    /// The access, with a bearer token shown only as its length.
    public var description: String {
        switch self {
        case .readOnly: "readOnly"
        case .open: "open"
        case .bearerToken(let token): "bearerToken(\(token.count) characters, not shown)"
        }
    }

    /// The same as ``description``: the token is not shown.
    public var debugDescription: String { description }
}

extension CountdownDashboard: CustomStringConvertible {
    /// The dashboard's settings, without its token.
    public var description: String {
        "CountdownDashboard(writeAccess: \(writeAccess), allowedHosts: \(allowedHosts), "
            + "allowedOrigins: \(allowedOrigins.sorted()))"
    }
}
