import Foundation
import Logging

extension CountdownStore {
    /// How a store keeps time, on any engine. Every default is stated on its property. (What
    /// only one engine has to say goes to that engine's opening.)
    public struct Configuration: Sendable {
        /// Where time comes from. Default: ``SystemClock``. Tests pass a ``VirtualClock``.
        public var clock: any StoreClock
        /// How often the lease holder writes a heartbeat. Default: 1 s.
        public var heartbeatInterval: Duration
        /// How long a lease lasts without a heartbeat before another process may take it.
        /// Default: 2 s (twice the heartbeat interval).
        ///
        /// Active time counts until the lease runs out, so after a crash an `active` countdown
        /// counts at most this much of the downtime. Keep it longer than the heartbeat interval.
        public var leaseDuration: Duration
        /// How far the system clock may drift from the store wall clock before a clock edit is
        /// recorded. Default: 1 s.
        public var clockEditTolerance: Duration
        /// How long a write of the embedded engine waits for another process's write lock before
        /// failing. Default: 10 s.
        @available(
            *, deprecated, message: "give SQLiteOptions(busyTimeout:) to CountdownStore(path:configuration:sqlite:)"
        )
        public var busyTimeout: Duration {
            get { sqliteBusyTimeout ?? .seconds(10) }
            set { sqliteBusyTimeout = newValue }
        }
        /// The deprecated ``busyTimeout``, when one was set.
        package var sqliteBusyTimeout: Duration?
        /// What a commit survives: a crash of the process always; a power loss or kernel crash
        /// too with ``Durability/full``. Default: ``Durability/normal``. What each value means on
        /// each engine is said at the engine's opening.
        public var durability: Durability
        /// How long a reader of a named consumer keeps the events it was given before another
        /// reader of that consumer may have them, unless it acknowledges them first (each
        /// acknowledgement renews the claim). After a crash, what the dead reader had not
        /// acknowledged is delivered again this long after its last acknowledgement. Default: 30 s.
        public var claimTimeout: Duration
        /// What the lease holder deletes as it ages, and when. Default: ended countdowns and
        /// events after 7 days (``Retention/init(endedItems:events:staleConsumer:batchSize:interval:)``);
        /// ``Retention/keepEverything`` deletes nothing.
        public var retention: Retention = Retention()
        /// How many expiries the ticker records in one transaction at most, oldest first: however
        /// many countdowns come due at once, they are recorded in short transactions of this
        /// size, each committed (and its events delivered) before the next, with other writes
        /// going between them. Other writes record at most a tenth of it. Default: 1,000.
        public var expiryBatchSize: Int = 1000
        /// How long stopping (``CountdownStore/close()``, a cancelled ticker, a reader of a
        /// named consumer ending) waits for the database to take its final writes: the last
        /// heartbeat, the freed lease, the claims given back. Past it, stopping goes on, logs a
        /// warning of what it could not write, and leaves it to run out by itself. Default: `nil`,
        /// the lease duration (at least 1 s), by when the lease has run out anyway. A host on a
        /// slow or distant database may wait longer; zero or less does not wait.
        public var stopTimeout: Duration?
        /// Where the store logs. Default: a logger labelled `CountdownStore`.
        public var logger: Logger
        /// What the store reports through swift-metrics. Default: to the backend the host
        /// bootstrapped, if any, without a group dimension.
        public var metrics: MetricsOptions = MetricsOptions()

        /// A configuration with the stated defaults, any of which can be overridden here.
        public init(
            clock: any StoreClock = SystemClock(),
            heartbeatInterval: Duration = .seconds(1),
            leaseDuration: Duration = .seconds(2),
            clockEditTolerance: Duration = .seconds(1),
            durability: Durability = .normal,
            claimTimeout: Duration = .seconds(30),
            logger: Logger = Logger(label: "CountdownStore")
        ) {
            self.clock = clock
            self.heartbeatInterval = heartbeatInterval
            self.leaseDuration = leaseDuration
            self.clockEditTolerance = clockEditTolerance
            self.durability = durability
            self.claimTimeout = claimTimeout
            self.logger = logger
        }

        /// A configuration with the embedded engine's busy timeout in it, as before it moved to
        /// that engine's opening.
        @available(
            *, deprecated, message: "give SQLiteOptions(busyTimeout:) to CountdownStore(path:configuration:sqlite:)"
        )
        public init(
            clock: any StoreClock = SystemClock(),
            heartbeatInterval: Duration = .seconds(1),
            leaseDuration: Duration = .seconds(2),
            clockEditTolerance: Duration = .seconds(1),
            busyTimeout: Duration,
            durability: Durability = .normal,
            claimTimeout: Duration = .seconds(30),
            logger: Logger = Logger(label: "CountdownStore")
        ) {
            self.init(
                clock: clock, heartbeatInterval: heartbeatInterval, leaseDuration: leaseDuration,
                clockEditTolerance: clockEditTolerance, durability: durability, claimTimeout: claimTimeout,
                logger: logger)
            sqliteBusyTimeout = busyTimeout
        }

        /// The lease duration, at least a second: how long a stop waits for the database unless
        /// ``stopTimeout`` says otherwise, and how long a server engine's session waits on anything.
        package var leaseAtLeastASecond: Duration { max(leaseDuration, .seconds(1)) }

        /// How many expiries a write other than the ticker's batches records at most.
        var writeExpiryBatch: Int { max(1, expiryBatchSize / 10) }
    }
}

extension CountdownStore {
    /// What the lease holder deletes as it ages: ended countdowns, events every named consumer
    /// has passed, and the retired keys that nothing remaining refers to.
    ///
    /// The holder prunes a batch at a time (``batchSize`` rows per transaction), oldest first,
    /// every ``interval``, so that no transaction grows with the store. An event that a named
    /// consumer has not acknowledged is never deleted while that consumer is read; a consumer
    /// not read for ``staleConsumer`` stops holding retention back (with a warning in the log
    /// and a `consumer_stale` event).
    public struct Retention: Sendable, Hashable {
        /// How long an expired or cancelled countdown is kept after it ended; `nil`: forever.
        public var endedItems: Duration?
        /// How long an event is kept after it was recorded; `nil`: forever.
        public var events: Duration?
        /// How long a named consumer may go unread before it stops holding events back; `nil`:
        /// never (its events are kept until it reads them, however long that takes).
        public var staleConsumer: Duration?
        /// Rows deleted per transaction.
        public var batchSize: Int
        /// How often the lease holder prunes.
        public var interval: Duration

        /// A retention policy. Defaults: ended countdowns and events kept 7 days, a consumer
        /// unread for 30 days stops holding events back, 1,000 rows a transaction, every 30 s.
        public init(
            endedItems: Duration? = .seconds(7 * 86_400), events: Duration? = .seconds(7 * 86_400),
            staleConsumer: Duration? = .seconds(30 * 86_400), batchSize: Int = 1000, interval: Duration = .seconds(30)
        ) {
            self.endedItems = endedItems
            self.events = events
            self.staleConsumer = staleConsumer
            self.batchSize = batchSize
            self.interval = interval
        }

        /// Deletes nothing: every ended countdown, event and retired key is kept.
        public static let keepEverything = Retention(endedItems: nil, events: nil, staleConsumer: nil)

        /// Whether this policy deletes anything.
        public var prunes: Bool { endedItems != nil || events != nil }
    }

    /// What an acknowledged operation survives.
    ///
    /// Either way a killed process loses nothing it was told had committed, and the database
    /// stays sound through a power loss; the two differ in what a power loss or kernel crash
    /// takes back.
    public enum Durability: String, Sendable, Hashable, CaseIterable {
        /// The engine's everyday setting. A power loss may take back the last commits (always the
        /// newest ones: what survives is a prefix of what was acknowledged), never tear the
        /// database. (Each engine's opening says what it sets.)
        case normal
        /// Every commit is on disk before it returns, so a power loss takes back nothing
        /// acknowledged; each commit costs a disk sync. (Each engine's opening says what it sets.)
        case full
    }
}
