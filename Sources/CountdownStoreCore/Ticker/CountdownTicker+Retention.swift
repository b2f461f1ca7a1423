import Foundation
import Logging
import ServiceLifecycle

// The lease holder prunes what retention lets go, and reports the store's gauges.
extension CountdownTicker {
    // MARK: - Retention

    /// While this ticker holds the lease, applies ``CountdownStore/Configuration/retention``
    /// every ``CountdownStore/Retention/interval`` (the first pass soon after the lease is
    /// taken), in batches; returns at once when the retention keeps everything.
    func retainWhileHolding() async throws {
        let retention = store.configuration.retention
        guard retention.prunes else { return }
        let clock = store.configuration.clock
        let intervalMs = max(1000, retention.interval.milliseconds)
        var next = clock.bootMilliseconds + min(intervalMs, 5000)
        while !Task.isCancelled {
            try await clock.sleep(untilBootMilliseconds: next)
            next = clock.bootMilliseconds + intervalMs
            if isHolding { await retainOnce() }
        }
    }

    /// Whether this ticker holds the lease as of its last heartbeat.
    var isHolding: Bool {
        if case .held = leaseStatus { return true }
        return false
    }

    /// One retention pass; a failure is logged, and the next pass tries again.
    func retainOnce() async {
        let logger = store.configuration.logger
        do {
            let pruned = try await store.applyRetention()
            if pruned.items + pruned.events + pruned.retiredKeys > 0 {
                logger.debug(
                    "retention pruned",
                    metadata: [
                        "items": "\(pruned.items)", "events": "\(pruned.events)",
                        "retired_keys": "\(pruned.retiredKeys)",
                    ])
            }
        } catch {
            if !Task.isCancelled {
                logger.warning("retention pass failed; trying again later", metadata: ["error": "\(error)"])
            }
        }
    }

    // MARK: - Gauges

    /// While this ticker holds the lease and a metrics backend is set, refreshes the store's
    /// gauges (items by state, each named consumer's lag) every
    /// ``CountdownStore/MetricsOptions/gaugeInterval``, the first soon after the lease is taken.
    func gaugeWhileHolding() async throws {
        guard store.metrics.enabled else { return }
        let clock = store.configuration.clock
        let intervalMs = max(100, store.configuration.metrics.gaugeInterval.milliseconds)
        var next = clock.bootMilliseconds + min(intervalMs, 1000)
        while !Task.isCancelled {
            try await clock.sleep(untilBootMilliseconds: next)
            next = clock.bootMilliseconds + intervalMs
            guard isHolding else { continue }
            do {
                try await store.refreshGauges()
            } catch {
                if !Task.isCancelled {
                    store.configuration.logger.warning(
                        "could not read the metrics' gauges; trying again later", metadata: ["error": "\(error)"])
                }
            }
        }
    }
}
