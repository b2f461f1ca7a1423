import Foundation

// A process asked to stop ends within its lease duration plus a few seconds, whatever the
// database does (SPEC section 7). Every wait on the way to stopping (the ticker's last
// operation, its final heartbeat, a reader giving up its claims, an acknowledgement, closing)
// is a bounded wait: it gives up at the stop's deadline, leaving the work it waited for to end
// or fail on its own, cancelled, and the caller logs what was not written.

/// The deadline of a stop: the instant, on the machine's boot clock, at which the waits on the
/// way to stopping give up. It starts once, at the first ``start()``, and stays.
package final class StopDeadline: Sendable {
    /// How long after the stop began the waits give up.
    package let bound: Duration
    private let started = Locked<Int64?>(nil)

    /// A deadline `bound` after the stop begins; it has not begun yet.
    package init(bound: Duration) {
        self.bound = bound
    }

    /// A deadline `bound` from now.
    package static func startingNow(bound: Duration) -> StopDeadline {
        let deadline = StopDeadline(bound: bound)
        deadline.start()
        return deadline
    }

    /// The deadline (boot-clock milliseconds), started now unless it had started already.
    @discardableResult
    package func start() -> Int64 {
        let now = SystemClock().bootMilliseconds
        let bound = bound.milliseconds
        return started.withLock { instant in
            if let instant { return instant }
            instant = now + bound
            return now + bound
        }
    }

    /// The deadline, once started.
    package var instant: Int64? { started.withLock { $0 } }

    /// Whether the stop has begun.
    package var hasStarted: Bool { instant != nil }
}

extension CountdownStore {
    /// How long the waits on the way to stopping wait for the database: the configuration's
    /// ``Configuration/stopTimeout``, or else the lease duration (at least a second). By then the
    /// lease has run out anyway, and what was not written runs out by itself.
    package var stopBound: Duration {
        if let timeout = configuration.stopTimeout { return max(timeout, .zero) }
        return configuration.leaseAtLeastASecond
    }
}
