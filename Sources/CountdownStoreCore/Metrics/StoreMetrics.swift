import CoreMetrics
import Foundation

/// The store's metrics, reported through swift-metrics once what they count has committed.
///
/// Names follow the Prometheus conventions (`countdown_` prefix, `_total` on counters, base units
/// in the name); dimensions are bounded sets: policy, state, operation, a named consumer's name,
/// and a group only where the host opted in. The article "Watching a store" lists them.
final class StoreMetrics: Sendable {
    /// The backend, or `nil` when none is bootstrapped (nothing is reported then).
    let factory: (any MetricsFactory)?
    let groupDimension: Bool
    /// The handles made so far, by name and dimensions.
    private let handles = Locked([String: any Sendable]())

    init(_ options: CountdownStore.MetricsOptions) {
        let factory = options.factory ?? MetricsSystem.factory
        self.factory = factory is NOOPMetricsHandler ? nil : factory
        groupDimension = options.groupDimension
    }

    /// Whether a backend receives anything.
    var enabled: Bool { factory != nil }

    /// The item events counted, each under its own name.
    static let itemCounters: [String: String] = [
        EventKind.started.rawValue: "countdown_items_started_total",
        EventKind.stopwatchStarted.rawValue: "countdown_items_started_total",
        EventKind.replaced.rawValue: "countdown_items_started_total",
        EventKind.expired.rawValue: "countdown_items_expired_total",
        EventKind.cancelled.rawValue: "countdown_items_cancelled_total",
        EventKind.paused.rawValue: "countdown_items_paused_total",
        EventKind.resumed.rawValue: "countdown_items_resumed_total",
        EventKind.restarted.rawValue: "countdown_items_restarted_total",
        EventKind.extended.rawValue: "countdown_items_extended_total",
        EventKind.shortened.rawValue: "countdown_items_shortened_total",
        EventKind.postponed.rawValue: "countdown_items_postponed_total",
        EventKind.removed.rawValue: "countdown_items_removed_total",
    ]

    /// The store events counted, each under its own name.
    static let storeCounters: [String: String] = [
        EventKind.clockEdited.rawValue: "countdown_clock_edits_total",
        EventKind.calibrated.rawValue: "countdown_calibrations_total",
        EventKind.hostSuspended.rawValue: "countdown_host_suspends_total",
    ]

    private func handle<H: Sendable>(_ name: String, _ dimensions: [(String, String)], make: (any MetricsFactory) -> H)
        -> H?
    {
        guard let factory else { return nil }
        let id = name + dimensions.map { "|\($0.0)=\($0.1)" }.joined()
        return handles.withLock { handles in
            if let existing = handles[id] as? H { return existing }
            let made = make(factory)
            handles[id] = made
            return made
        }
    }

    func counter(_ name: String, _ dimensions: [(String, String)] = []) -> Counter? {
        handle(name, dimensions) { Counter(label: name, dimensions: dimensions, factory: $0) }
    }

    func timer(_ name: String, _ dimensions: [(String, String)] = []) -> CoreMetrics.Timer? {
        handle(name, dimensions) { CoreMetrics.Timer(label: name, dimensions: dimensions, factory: $0) }
    }

    func gauge(_ name: String, _ dimensions: [(String, String)] = []) -> Gauge? {
        handle(name, dimensions) { Gauge(label: name, dimensions: dimensions, factory: $0) }
    }

    /// A write transaction of `operation` committed after `duration`, having appended `tally`.
    func committed(_ operation: WriteOperation, duration: Duration, tally: EventTally?) {
        timer("countdown_write_duration_seconds", [("operation", operation.rawValue)])?.recordNanoseconds(
            Self.nanoseconds(duration))
        guard let tally else { return }
        for entry in tally.entries {
            if let name = Self.itemCounters[entry.kind] {
                var dimensions = [("policy", entry.policy?.rawValue ?? "unknown")]
                if groupDimension { dimensions.append(("group", entry.group ?? "")) }
                counter(name, dimensions)?.increment()
                if entry.kind == EventKind.expired.rawValue, let late = entry.lateMs {
                    timer("countdown_expiry_lateness_seconds", [("policy", entry.policy?.rawValue ?? "unknown")])?
                        .recordNanoseconds(max(0, late) * 1_000_000)
                }
            } else if let name = Self.storeCounters[entry.kind] {
                counter(name)?.increment()
            }
        }
    }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// A committed batch of retention deleted these rows.
    func pruned(items: Int, events: Int, retiredKeys: Int) {
        guard enabled else { return }
        if items > 0 { counter("countdown_pruned_items_total")?.increment(by: items) }
        if events > 0 { counter("countdown_pruned_events_total")?.increment(by: events) }
        if retiredKeys > 0 { counter("countdown_pruned_retired_keys_total")?.increment(by: retiredKeys) }
    }

    /// Events handed to a reader of the named consumer `name`.
    func delivered(_ count: Int, consumer name: String) {
        guard enabled, count > 0 else { return }
        counter("countdown_consumer_deliveries_total", [("consumer", name)])?.increment(by: count)
    }

    /// Whether this instance holds the lease.
    func leaseHeld(_ held: Bool) {
        gauge("countdown_lease_held")?.record(held ? 1 : 0)
    }

    /// The items by state (and group, where opted in) and each named consumer's lag, as read now.
    func gauges(counts: CountdownCounts, consumers: [ConsumerStatus]) {
        guard enabled else { return }
        for state in CountdownState.allCases {
            gauge("countdown_items", [("state", state.rawValue)])?.record(counts.count(state))
        }
        if groupDimension {
            for entry in counts.entries {
                gauge("countdown_group_items", [("state", entry.state.rawValue), ("group", entry.group ?? "")])?.record(
                    entry.count)
            }
        }
        for consumer in consumers {
            gauge("countdown_consumer_lag_events", [("consumer", consumer.name)])?.record(consumer.lag)
        }
    }
}

extension CountdownStore {
    /// Reads the items by state and the named consumers' lag, and records them in the gauges.
    func refreshGauges() async throws(CountdownError) {
        guard metrics.enabled else { return }
        let counts = try await counts()
        let consumers = try await consumerStatuses()
        metrics.gauges(counts: counts, consumers: consumers)
    }
}
