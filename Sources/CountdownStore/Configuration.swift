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
        /// What a commit survives: a crash of the process always; a power loss or kernel crash
        /// too with ``Durability/full``. Default: ``Durability/normal``. Applies to a store that
        /// opens its own file; a host's database keeps the host's settings.
        public var durability: Durability
        /// How long a reader of a named consumer keeps the events it was given before another
        /// reader of that consumer may have them, unless it acknowledges them first (each
        /// acknowledgement renews the claim). After a crash, what the dead reader had not
        /// acknowledged is delivered again this long after its last acknowledgement. Default: 30 s.
        public var claimTimeout: Duration
        /// Where the store logs. Default: a logger labelled `CountdownStore`.
        public var logger: Logger

        /// A configuration with the stated defaults, any of which can be overridden here.
        public init(
            clock: any StoreClock = SystemClock(),
            heartbeatInterval: Duration = .seconds(1),
            leaseDuration: Duration = .seconds(2),
            clockEditTolerance: Duration = .seconds(1),
            busyTimeout: Duration = .seconds(10),
            durability: Durability = .normal,
            claimTimeout: Duration = .seconds(30),
            logger: Logger = Logger(label: "CountdownStore")
        ) {
            self.clock = clock
            self.heartbeatInterval = heartbeatInterval
            self.leaseDuration = leaseDuration
            self.clockEditTolerance = clockEditTolerance
            self.busyTimeout = busyTimeout
            self.durability = durability
            self.claimTimeout = claimTimeout
            self.logger = logger
        }
    }
}

extension CountdownStore {
    /// What an acknowledged operation survives.
    ///
    /// Either way a killed process loses nothing it was told had committed, and the file stays
    /// sound through a power loss; the two differ in what a power loss or kernel crash takes back.
    public enum Durability: String, Sendable, Hashable, CaseIterable {
        /// SQLite's `synchronous=NORMAL` in WAL mode: the write-ahead log is synced at checkpoints,
        /// not at every commit. A power loss may take back the last commits (always the newest
        /// ones: what survives is a prefix of what was acknowledged), never tear the file.
        case normal
        /// SQLite's `synchronous=FULL`: every commit is synced before it returns, so a power loss
        /// takes back nothing acknowledged. Each commit costs a disk sync.
        case full
    }
}
