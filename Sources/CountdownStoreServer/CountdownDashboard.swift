import CountdownStoreCore
import Hummingbird
import Prometheus

/// A store's live dashboard and HTTP API, as routes a host adds to its own Hummingbird router,
/// under a path of its choosing and behind its own middleware.
///
/// ```swift
/// let dashboard = CountdownDashboard(store: store, writeAccess: .open)
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
        /// token is never logged.
        case bearerToken(String)
        /// Every request that reaches the routes may write: the host's own middleware in front
        /// of them decides who does.
        case open
    }

    /// The store shown and changed.
    public let store: CountdownStore
    /// Who may change it.
    public let writeAccess: WriteAccess
    /// Where `GET metrics` reads the Prometheus text from; `nil`: no `metrics` route (a host
    /// serves its metrics itself).
    public let metricsRegistry: PrometheusCollectorRegistry?
    let stopping = StopSignal()

    /// A dashboard of `store`.
    ///
    /// - Parameters:
    ///   - store: the store to show.
    ///   - writeAccess: who may change it; by default nobody.
    ///   - metricsRegistry: the registry whose metrics `GET metrics` serves, if any.
    public init(store: CountdownStore, writeAccess: WriteAccess = .readOnly, metricsRegistry: PrometheusCollectorRegistry? = nil) {
        self.store = store
        self.writeAccess = writeAccess
        self.metricsRegistry = metricsRegistry
    }

    /// Adds the page (`""`, then `dashboard.js` and `dashboard.css`), the API (`api/…`), the
    /// event stream (`api/stream`), `healthz` and, with a registry, `metrics` to `router`: a
    /// router or a group of one.
    public func addRoutes<Context: RequestContext>(to router: some RouterMethods<Context>) {
        APIRoutes<Context>(dashboard: self).add(to: router)
    }

    /// Ends the open event streams, so that a server shutting down is not held back by them.
    public func stopStreams() {
        stopping.stop()
    }
}
