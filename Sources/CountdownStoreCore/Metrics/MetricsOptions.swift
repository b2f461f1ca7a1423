import CoreMetrics

extension CountdownStore {
    /// What a store reports through swift-metrics, and to which backend. The names, types and
    /// dimensions are listed in the article "Watching a store".
    public struct MetricsOptions: Sendable {
        /// The backend: `nil` (the default) uses the process's `MetricsSystem.factory`, the one
        /// the host bootstrapped. With no backend bootstrapped the store reports nothing and
        /// spends nothing on it.
        public var factory: (any MetricsFactory)?
        /// Whether the item counters carry a `group` dimension. Default: `false`. Turn it on only
        /// when the store's groups are a small fixed set: each group makes series of its own.
        public var groupDimension: Bool
        /// How often the lease holder's ticker refreshes the gauges (items by state, each named
        /// consumer's lag). Each refresh counts the items by state and group (one read over an
        /// index). Default: 10 s.
        public var gaugeInterval: Duration

        /// Options with the stated defaults.
        public init(
            factory: (any MetricsFactory)? = nil, groupDimension: Bool = false, gaugeInterval: Duration = .seconds(10)
        ) {
            self.factory = factory
            self.groupDimension = groupDimension
            self.gaugeInterval = gaugeInterval
        }
    }
}
