import Foundation
import Logging

extension CountdownStore {
    /// How a store keeps time and talks to SQLite. Every default is stated on its property.
    public struct Configuration: Sendable {
        /// Where time comes from. Default: ``SystemClock``. Tests pass a ``VirtualClock``.
        public var clock: any StoreClock
        /// How often the lease holder writes a heartbeat. Default: 1 s.
        ///
        /// After a crash an `active` countdown loses at most this much time.
        public var heartbeatInterval: Duration
        /// How long a lease lasts without a heartbeat before another process may take it.
        /// Default: 2 s (twice the heartbeat interval).
        public var leaseDuration: Duration
        /// How far the system clock may drift from the store wall clock before a clock edit is
        /// recorded. Default: 1 s.
        public var clockEditTolerance: Duration
        /// How long a write waits for another process's write lock before failing. Default: 10 s.
        public var busyTimeout: Duration
        /// Where the store logs. Default: a logger labelled `CountdownStore`.
        public var logger: Logger

        /// A configuration with the stated defaults, any of which can be overridden here.
        public init(
            clock: any StoreClock = SystemClock(),
            heartbeatInterval: Duration = .seconds(1),
            leaseDuration: Duration = .seconds(2),
            clockEditTolerance: Duration = .seconds(1),
            busyTimeout: Duration = .seconds(10),
            logger: Logger = Logger(label: "CountdownStore")
        ) {
            self.clock = clock
            self.heartbeatInterval = heartbeatInterval
            self.leaseDuration = leaseDuration
            self.clockEditTolerance = clockEditTolerance
            self.busyTimeout = busyTimeout
            self.logger = logger
        }
    }
}
