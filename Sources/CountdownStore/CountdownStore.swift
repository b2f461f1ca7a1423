import Foundation
import Logging

/// Many named countdowns and stopwatches kept in SQLite, so they survive restarts, crashes,
/// suspends and clock changes.
///
/// ```swift
/// let store = try CountdownStore(path: "countdowns.sqlite")
/// try await store.start("order-1042", duration: .seconds(15 * 60), group: "payments")
/// let item = try await store.countdown("order-1042")   // remaining ≈ 15 min
/// ```
///
/// Every operation is one transaction that also appends an event. Each transaction first moves
/// the store's clocks (``StoreTime``) forward to now and writes them back, so every process that
/// opens the file agrees on the time. A ticker (or a host calling ``heartbeat()``) holds the
/// store's lease: while one does, time counts as active; otherwise it counts as background gap.
public final class CountdownStore: Sendable {
    /// The configuration the store was opened with.
    public let configuration: Configuration
    /// The database file, or `nil` when the host handed the store its own database.
    public let path: String?
    /// This store instance's name in the lease row.
    public let instanceID: String

    /// The database engine: every read and write of the store goes through it.
    package let engine: any StorageEngine
    /// The operations under way on the engine: closing refuses new ones and waits for these.
    let using = EngineUse()
    /// Bumped after every committed write of this instance that changed items or events.
    let changes = ChangeSignal()
    private let state = Locked(MemoryState())

    private struct MemoryState {
        /// No clock reading handed out by this instance goes below this.
        var floor: StoreTime?
        /// Whether the host said it is suspended.
        var suspended = false
        /// Whether this instance has ever taken the lease (so closing has a lease to give up).
        var tookLease = false
        /// The checkpoint and lease expiry this instance saw last, to compute the time without a query.
        var lastCheckpoint: Checkpoint?
        var lastLeaseExpiry: Int64 = 0
        var closed = false
        /// The named consumers this instance's readers have claimed events of.
        var claimedConsumers: Set<String> = []
        /// How many readers of named consumers this instance has started.
        var readers = 0
        /// The named consumers this instance found unread for too long and said so.
        var staleConsumers: Set<String> = []
    }

    /// A store on `engine`, whose database is already migrated and has its clock row.
    package init(engine: any StorageEngine, path: String?, configuration: Configuration) {
        self.engine = engine
        self.path = path
        self.configuration = configuration
        self.instanceID = "\(ProcessInfo.processInfo.hostName):\(ProcessInfo.processInfo.processIdentifier):\(UUID().uuidString.prefix(8).lowercased())"
        configuration.logger.debug("opened countdown store", metadata: ["path": "\(path ?? "host database")"])
    }

    /// A name for a new reader of a named consumer: this instance's, and a number.
    func newReaderName() -> String {
        let number = state.withLock { memory in
            memory.readers += 1
            return memory.readers
        }
        return "\(instanceID):\(number)"
    }

    /// Remembers that a reader of this instance claims events of the consumer `name`.
    func noteClaims(of name: String) {
        _ = state.withLock { $0.claimedConsumers.insert(name) }
    }

    /// Remembers that the consumer `name` was found stale; whether this is the first time.
    func noteStale(_ name: String) -> Bool {
        state.withLock { $0.staleConsumers.insert(name).inserted }
    }

    /// The consumers readers of this instance have claimed events of, by name.
    func claimedConsumers() -> [String] {
        state.withLock { $0.claimedConsumers }.sorted()
    }

    // MARK: - Transactions with the clocks moved to now

    /// Runs `body` in one write transaction, after moving the store's clocks to now,
    /// recording the expiry of every countdown that has come due, and checkpointing the clocks.
    ///
    /// When `body` refuses (throws a ``CountdownError``) the transaction is rolled back, except
    /// for the expiries it recorded on the way: a countdown found over stays over, with its event.
    ///
    /// - Parameters:
    ///   - notifies: whether the write changes items or events, so that waiters (the ticker,
    ///     event streams) should look again once it commits. Recorded expiries notify whatever it says.
    ///   - movesCheckpoint: whether the write moves the checkpoint or the lease whatever the
    ///     engine (a heartbeat, suspending, calibrating, giving up the lease): it takes the clock
    ///     row's lock first. Where writers run side by side, other writes leave the row alone
    ///     unless they find the clock edited.
    ///   - leavingExpiriesToHolder: whether the write records no expiry while a live lease is
    ///     held (by this instance or another): a named consumer's claims and acknowledgements,
    ///     which deliver what the holder's ticker records rather than doing its work.
    func writing<T: Sendable>(
        notifies: Bool = true, movesCheckpoint: Bool = false, expiryLimit: Int? = nil, leavingExpiriesToHolder: Bool = false,
        _ body: @escaping @Sendable (any RepositoryWriting, Now) throws -> T
    ) async throws(CountdownError) -> T {
        try await writing(
            notifies: notifies, movesCheckpoint: movesCheckpoint, expiryLimit: expiryLimit,
            leavingExpiriesToHolder: leavingExpiriesToHolder
        ) { tx, now, _ in
            try body(tx, now)
        }
    }

    /// ``writing(notifies:movesCheckpoint:_:)`` whose body also gets the countdowns that moving the clocks expired.
    ///
    /// The write records at most `expiryLimit` due expiries, oldest first (see
    /// ``advanceClocks(_:movingCheckpoint:expiryLimit:)``); more due than that stay for the next
    /// writes (the ticker's batches). A body that must change the checkpoint itself throws
    /// ``CheckpointBehindBacklog`` when this write could not move it to now: the write is rolled
    /// back, the backlog recorded in batches of short transactions, and the write tried again.
    /// A body that never refuses (`bodyMayRefuse: false`) runs without the savepoint that keeps
    /// the expiries of a refused write.
    func writing<T: Sendable>(
        notifies: Bool = true, movesCheckpoint: Bool = false, expiryLimit: Int? = nil, leavingExpiriesToHolder: Bool = false,
        bodyMayRefuse: Bool = true, _ body: @escaping @Sendable (any RepositoryWriting, Now, [ItemRecord]) throws -> T
    ) async throws(CountdownError) -> T {
        let limit = max(1, expiryLimit ?? configuration.writeExpiryBatch)
        while true {
            let outcome: (result: Result<T, CountdownError>, expired: Bool)?
            outcome = try await translatingErrors(path: path) {
                do {
                    return try await using.run { try await engine.write { tx in
                        let (now, expired) = try self.advanceClocks(
                            tx, movingCheckpoint: movesCheckpoint, expiryLimit: limit, leavingToHolder: leavingExpiriesToHolder)
                        guard !expired.isEmpty, bodyMayRefuse else { return (.success(try body(tx, now, expired)), !expired.isEmpty) }
                        do {
                            return (.success(try tx.savepoint { try body(tx, now, expired) }), true)
                        } catch let refusal as CountdownError {
                            return (.failure(refusal), true)
                        }
                    } }
                } catch is CheckpointBehindBacklog {
                    return nil
                }
            }
            guard let outcome else {
                // The checkpoint could not move past expiries still to record: record them first.
                while try await expireDueBatch() >= max(1, configuration.expiryBatchSize) {
                    await leaveWritesToOthers()
                }
                continue
            }
            if notifies || outcome.expired { changes.bump() }
            return try outcome.result.get()
        }
    }

    /// Between two batches of a backlog (or of a deletion): a pause in which this store writes
    /// nothing, long enough for a writer of another process that waits for the write lock
    /// (polling every millisecond, see ``DatabaseOpening``) to take it. Real time, not the
    /// store's clock: it only spaces transactions out.
    func leaveWritesToOthers() async {
        await engine.leaveWritesToOthers(for: .milliseconds(2))
    }

    /// Records one batch of due expiries (at most `limit`, never more than
    /// ``Configuration/expiryBatchSize``), oldest first, in one short transaction; returns how
    /// many it recorded.
    func expireDueBatch(limit: Int? = nil) async throws(CountdownError) -> Int {
        let limit = min(max(1, limit ?? configuration.expiryBatchSize), max(1, configuration.expiryBatchSize))
        return try await writing(notifies: false, expiryLimit: limit, bodyMayRefuse: false) { _, _, expired in expired.count }
    }

    /// Keeps the checkpoint and lease as this transaction leaves them: called by the few
    /// operations that change either after ``advanceClocks(_:)`` recorded them.
    private func remember(_ tx: any RepositoryReading) throws {
        let (checkpoint, lease, _) = try tx.clocks()
        remember(checkpoint, leaseExpiry: lease.expiresAtMs)
    }

    private func remember(_ checkpoint: Checkpoint?, leaseExpiry: Int64) {
        state.withLock { memory in
            memory.lastCheckpoint = checkpoint
            memory.lastLeaseExpiry = leaseExpiry
        }
    }

    /// The store's clocks now, computed from the last checkpoint this instance saw, without a query;
    /// `nil` before the first transaction.
    func cachedTime() -> Now? {
        let reading = engine.clockReading(ClockReading(configuration.clock))
        let (checkpoint, leaseExpiry) = state.withLock { ($0.lastCheckpoint, $0.lastLeaseExpiry) }
        guard let checkpoint else { return nil }
        let extrapolation = checkpoint.extrapolate(to: reading, leaseExpiresAt: leaseExpiry)
        return Now(raiseFloor(extrapolation.time), base: checkpoint, ticking: extrapolation.ticking)
    }

    /// Runs `body` in one read transaction with the store's clocks extrapolated to now.
    ///
    /// The body also learns whether any running countdown has come due (expired for every
    /// reader, not recorded yet), from the soonest deadlines the clock query reads anyway.
    func reading<T: Sendable>(
        events: Bool = false, _ body: @escaping @Sendable (any RepositoryReading, Now) throws -> T
    ) async throws(CountdownError) -> T {
        try await reading(events: events) { tx, now, _ in try body(tx, now) }
    }

    /// ``reading(_:)`` whose body also gets the soonest deadlines of running countdowns. With
    /// `events`, the body reads events by ID (see ``CountdownRepository/readEvents(_:)``).
    func reading<T: Sendable>(
        events: Bool = false, _ body: @escaping @Sendable (any RepositoryReading, Now, SoonestDeadlines) throws -> T
    ) async throws(CountdownError) -> T {
        try await translatingErrors(path: path) {
            try await using.run {
                let read = { @Sendable (tx: any RepositoryReading) throws -> T in
                    let (extrapolation, checkpoint, lease, soonest, _) = try self.extrapolate(tx)
                    self.remember(checkpoint, leaseExpiry: lease.expiresAtMs)
                    let now = Now(self.raiseFloor(extrapolation.time), base: checkpoint, ticking: extrapolation.ticking)
                    return try body(tx, now, soonest)
                }
                return try await events ? engine.readEvents(read) : engine.read(read)
            }
        }
    }

    /// The clocks extrapolated to a reading of this host's clock taken now, as the engine places
    /// it (its wall clock is the database's where the engine has one), and that reading.
    ///
    /// The reading is taken after the clock query, which on PostgreSQL waits for the clock row's
    /// lock: a reading taken before would be older than a checkpoint another writer saved
    /// meanwhile, and look like the clock moving back.
    private func extrapolate(
        _ tx: any RepositoryReading
    ) throws -> (Extrapolation, Checkpoint, Lease, SoonestDeadlines, ClockReading) {
        let (stored, lease, soonest) = try tx.clocks()
        guard let checkpoint = stored else {
            throw CountdownError(.unreadableDatabase, "the countdown_clock row is missing")
        }
        let reading = try tx.clockReading(ClockReading(configuration.clock))
        return (checkpoint.extrapolate(to: reading, leaseExpiresAt: lease.expiresAtMs), checkpoint, lease, soonest, reading)
    }

    /// The boot-clock instant at which the next running countdown comes due, from the soonest
    /// deadlines (index lookups); now when one has come due and is not recorded yet; `nil` when
    /// none will come due while the host stays as it is (an `active` countdown never comes due
    /// while suspended or while nobody holds the lease).
    func nextDueBoot() async throws(CountdownError) -> Int64? {
        try await translatingErrors(path: path) {
            try await using.run { try await engine.read { tx in
                let (extrapolation, checkpoint, lease, soonest, reading) = try self.extrapolate(tx)
                self.remember(checkpoint, leaseExpiry: lease.expiresAtMs)
                let time = self.raiseFloor(extrapolation.time)
                var policies: [CountdownPolicy] = [.wall]
                if extrapolation.ticking { policies.append(.active) }
                return policies.compactMap { policy in
                    soonest[policy].map { reading.boot + max(0, $0 - time.timeline(policy)) }
                }.min()
            } }
        }
    }

    /// A number that changes whenever another connection (another process) commits.
    func foreignChangeToken() async throws(CountdownError) -> Int {
        try await translatingErrors(path: path) { try await using.run { try await engine.foreignChangeToken() } }
    }

    /// `time`, raised so that this instance never hands out a clock reading below an earlier one.
    private func raiseFloor(_ time: StoreTime) -> StoreTime {
        state.withLock { memory in
            let raised = memory.floor.map { time.notBelow($0) } ?? time
            memory.floor = raised
            return raised
        }
    }

    /// Moves the clocks to now, recording first the expiry of at most `expiryLimit` countdowns
    /// that came due (oldest first), then moves the checkpoint there, recording a clock event
    /// when the system clock was moved.
    ///
    /// The rule that keeps every reader's instants still: **a checkpoint never moves in a way
    /// that would place an unrecorded expiry elsewhere.** A countdown due but not recorded is
    /// placed on W from the checkpoint (``Now/wall(when:reaches:)``): forwards when it came due
    /// after it, backwards when before. A move keeps every such instant exactly when it keeps
    /// `W − timeline` of each timeline with an expiry still to record and the old checkpoint did
    /// not slew; that is every move while a host ticks (or, for `wall` countdowns, whatever the
    /// host does) except a calibration. A move that would not is not made: the checkpoint stays,
    /// and readers go on extrapolating from it until the backlog is recorded (a write that must
    /// change the checkpoint itself, like suspending, records the backlog first). So a backlog of
    /// any size is recorded in short transactions, while the checkpoint follows time.
    ///
    /// Where writers run side by side (``StorageEngine/writersRunSideBySide``), the checkpoint
    /// moves only when `forced` or when the clock was edited (and no other instance holds a
    /// live lease: the holder alone records clock events then), under the clock row's lock;
    /// every other write leaves the row alone, so writers never queue on it. The clocks need no
    /// move to stay exact: every reader extrapolates them from the last checkpoint.
    private func advanceClocks(
        _ tx: any RepositoryWriting, movingCheckpoint forced: Bool, expiryLimit: Int, leavingToHolder: Bool = false
    ) throws -> (Now, [ItemRecord]) {
        let sideBySide = engine.writersRunSideBySide
        if forced && sideBySide { try tx.lockClocks() }
        // One reading for both: the new checkpoint's boot instant must be the one its clocks
        // were extrapolated to, or every transaction that straddles a millisecond would count
        // that millisecond twice.
        var (extrapolation, checkpoint, lease, soonest, reading) = try extrapolate(tx)
        var moves = movesCheckpoint(extrapolation, checkpoint, lease, forced: forced)
        if moves && sideBySide && !forced {
            // Found the clock edited: read the clocks again under the row's lock, which another
            // writer moving the checkpoint may have held meanwhile.
            try tx.lockClocks()
            (extrapolation, checkpoint, lease, soonest, reading) = try extrapolate(tx)
            moves = movesCheckpoint(extrapolation, checkpoint, lease, forced: forced)
        }
        let time = raiseFloor(extrapolation.time)
        var now = Now(time, base: checkpoint, ticking: extrapolation.ticking)
        let due = soonest.due(at: time)
        let expired: [ItemRecord]
        let backlog: SoonestDeadlines?
        if due == SoonestDeadlines() {
            (expired, backlog) = ([], nil)
        } else if leavingToHolder, lease.holder != nil, lease.expiresAtMs > extrapolation.unflooredWall {
            // The holder's ticker records them: all that are due stay the backlog.
            (expired, backlog) = ([], due)
        } else {
            (expired, backlog) = try Self.expireDue(tx, now, on: due, limit: expiryLimit)
        }
        guard moves else {
            remember(checkpoint, leaseExpiry: lease.expiresAtMs)
            return (now, expired)
        }
        // Where hosts share the checkpoint, it is their common mapping between W and the
        // timelines: saved as extrapolated, never raised by this instance's own floor, which
        // would shift the timelines against W for every other host.
        var next = checkpoint.advanced(
            to: sideBySide ? extrapolation.time : time, unflooredWall: extrapolation.unflooredWall, at: reading)
        if let backlog, !next.keepsPlacement(of: backlog, from: checkpoint) {
            // Expiries still to record would be placed elsewhere from the moved checkpoint.
            remember(checkpoint, leaseExpiry: lease.expiresAtMs)
            now.checkpointBehindBacklog = true
            return (now, expired)
        }
        let edited = clockEdited(extrapolation, checkpoint)
        if edited {
            try tx.append(
                EventRecord(
                    .clockEdited, at: time,
                    detail: [
                        "skew_ms": extrapolation.skew, "previous_skew_ms": checkpoint.clockSkew,
                        "system_ms": reading.system, "same_boot": extrapolation.sameBoot ? 1 : 0,
                    ]))
            configuration.logger.warning(
                "system clock moved against the store clock; counting by the boot clock",
                metadata: [
                    "skew_ms": "\(extrapolation.skew)", "previous_skew_ms": "\(checkpoint.clockSkew)",
                    "same_boot": "\(extrapolation.sameBoot)",
                ])
        }
        if edited || !extrapolation.sameBoot { next.clockSkew = extrapolation.skew }
        if let measured = tx.databaseClockSkew(wall: extrapolation.unflooredWall) {
            // Hosts sharing the database read its clock less this skew: every checkpoint records
            // it as measured now, so that their W stays the holder's (whose boot clock counts)
            // to within the measurement's precision, whatever either clock drifted.
            next.clockSkew = measured
        }
        try tx.save(next, creating: false)
        remember(next, leaseExpiry: lease.expiresAtMs)
        return (now, expired)
    }

    /// Whether the system clock moved against the store clock since `checkpoint` by more than
    /// the tolerance, plus how far the reading itself may be off (a slow round trip to a
    /// database server whose clock is the system clock leaves the instant of its reading vague).
    private func clockEdited(_ extrapolation: Extrapolation, _ checkpoint: Checkpoint) -> Bool {
        let tolerance = configuration.clockEditTolerance.milliseconds + extrapolation.skewUncertainty
        return extrapolation.sameBoot
            ? abs(extrapolation.skew - checkpoint.clockSkew) > tolerance
            : extrapolation.skew < -tolerance
    }

    /// Whether this write moves the checkpoint (see ``advanceClocks(_:movingCheckpoint:)``).
    private func movesCheckpoint(_ extrapolation: Extrapolation, _ checkpoint: Checkpoint, _ lease: Lease, forced: Bool) -> Bool {
        if let holder = lease.holder, holder != instanceID, lease.expiresAtMs > extrapolation.unflooredWall,
            engine.writersRunSideBySide
        {
            // Another instance holds a live lease: it alone moves the checkpoint and records
            // clock events, measured on its own boot clock.
            return false
        }
        return forced || !engine.writersRunSideBySide || clockEdited(extrapolation, checkpoint)
    }

    /// Records the expiry of at most `limit` running countdowns due at `now` on the timelines
    /// whose soonest deadline (in `timelines`) has been reached, oldest first (the most overdue
    /// on its own timeline came due earliest), each with its expiry event; returns
    /// them, and the soonest deadline on each timeline of those left due (`nil`: none left).
    private static func expireDue(
        _ tx: any RepositoryWriting, _ now: Now, on timelines: SoonestDeadlines, limit: Int
    ) throws -> ([ItemRecord], SoonestDeadlines?) {
        var due: [ItemRecord] = []
        // Only the timelines whose soonest deadline has been reached.
        for policy in CountdownPolicy.allCases where timelines[policy] != nil {
            due += try tx.dueForExpiry(policy: policy, dueBy: now.timeline(policy), limit: limit + 1)
        }
        due.sort { ($0.sortRemainingMs(at: now), $0.key) < ($1.sortRemainingMs(at: now), $1.key) }
        var left: SoonestDeadlines?
        if due.count > limit {
            var soonest = SoonestDeadlines()
            for item in due[limit...] {
                guard let deadline = item.deadlineMs else { continue }
                switch item.policy {
                case .wall: soonest.wall = min(soonest.wall ?? deadline, deadline)
                case .active: soonest.active = min(soonest.active ?? deadline, deadline)
                }
            }
            left = soonest
            due.removeSubrange(limit...)
        }
        var events: [EventRecord] = []
        events.reserveCapacity(due.count)
        for index in due.indices { events.append(expiry(&due[index], now)) }
        try tx.recordExpiries(due, events: events)
        return (due, left)
    }

    // MARK: - Time, lease and host lifecycle

    /// The store's clocks now.
    public func now() async throws(CountdownError) -> StoreTime {
        try await reading { _, now in now.clocks }
    }

    /// Whether this instance holds the store's lease after a ``heartbeat()``.
    public enum LeaseStatus: Sendable, Hashable {
        /// This instance holds the lease until the given instant: its ticker advances the active timeline.
        case held(until: Date)
        /// Another instance holds it until the given instant; this one stands by.
        case heldElsewhere(by: String, until: Date)
    }

    /// Takes or renews the store's lease and writes a heartbeat (a checkpoint of the clocks).
    ///
    /// The ticker calls this every ``Configuration/heartbeatInterval``. While an instance holds a
    /// live lease, time counts as active; a lease not renewed within
    /// ``Configuration/leaseDuration`` is free for another instance to take.
    @discardableResult
    public func heartbeat() async throws(CountdownError) -> LeaseStatus {
        let me = instanceID
        let leaseMs = configuration.leaseDuration.milliseconds
        let suspended = state.withLock { $0.suspended }
        return try await writing(notifies: false, movesCheckpoint: true) { tx, time in
            let lease = try tx.lease()
            let free = lease.holder == nil || lease.expiresAtMs <= time.wall
            guard lease.holder == me || free else {
                return .heldElsewhere(by: lease.holder ?? "", until: Date(millisecondsSince1970: lease.expiresAtMs))
            }
            // Taking the lease (or renewing one that ran out) turns the time since the checkpoint
            // from background gap into active time for every reader: the checkpoint must be now.
            if free { try time.requireCheckpointAtNow() }
            if lease.holder != me, var checkpoint = try tx.checkpoint(), checkpoint.suspended != suspended {
                try time.requireCheckpointAtNow()
                // A new holder starts from its own host's state, not the suspended flag of a dead one.
                checkpoint.suspended = suspended
                try tx.save(checkpoint, creating: false)
            }
            let renewed = Lease(
                holder: me, acquiredAtMs: lease.holder == me ? lease.acquiredAtMs : time.wall,
                expiresAtMs: time.wall + leaseMs)
            self.state.withLock { $0.tookLease = true }
            try tx.save(renewed)
            try self.remember(tx)
            return .held(until: Date(millisecondsSince1970: renewed.expiresAtMs))
        }
    }

    /// Tells the store the host is going to the background: from now until ``resume()``,
    /// time counts as background gap, so `active` items stop and `wall` items keep counting.
    public func suspend() async throws(CountdownError) {
        try await setSuspended(true)
    }

    /// Tells the store the host is back in the foreground: time counts as active again.
    public func resume() async throws(CountdownError) {
        try await setSuspended(false)
    }

    private func setSuspended(_ suspended: Bool) async throws(CountdownError) {
        state.withLock { $0.suspended = suspended }
        let me = instanceID
        let leaseMs = configuration.leaseDuration.milliseconds
        try await writing(movesCheckpoint: true) { tx, time in
            guard var checkpoint = try tx.checkpoint(), checkpoint.suspended != suspended else { return }
            try time.requireCheckpointAtNow()
            checkpoint.suspended = suspended
            try tx.save(checkpoint, creating: false)
            var lease = try tx.lease()
            if !suspended, lease.holder == me {
                // Back in the foreground: active time counts from this instant, not from the next heartbeat.
                lease.expiresAtMs = time.wall + leaseMs
                try tx.save(lease)
            }
            try tx.append(EventRecord(suspended ? .hostSuspended : .hostResumed, at: time))
            try self.remember(tx)
        }
    }

    /// How far ahead of the store wall clock a calibration may move it without `force`: one day.
    public static let calibrationForwardLimit: Duration = .seconds(24 * 60 * 60)

    /// Sets the store wall clock to a trusted time (a server's), persisted as an offset from the
    /// system clock. Durations are unaffected: only instants move.
    ///
    /// The wall clock W never goes backwards. A server time behind W by more than
    /// ``Configuration/clockEditTolerance`` is refused unless `force` is set; with `force`, W
    /// advances at half speed from where it is until the trusted time catches up (twice as long
    /// as the difference), so instants written meanwhile stay distinct and ordered. Within the
    /// tolerance it does the same without `force`. A server time more than
    /// ``calibrationForwardLimit`` ahead of W is refused unless `force` is set too: moved there,
    /// W could only come back by waiting.
    ///
    /// - Parameters:
    ///   - serverTime: the trusted time now, between 1970 and 9999.
    ///   - force: accept a server time behind W, or more than a day ahead of it.
    /// - Returns: the store's clocks right after the calibration.
    /// - Throws: ``CountdownError/Code/invalidArgument`` for a time out of range, or one that
    ///   needs `force` without it (nothing is written then).
    @discardableResult
    public func calibrate(serverTime: Date, force: Bool = false) async throws(CountdownError) -> StoreTime {
        guard let serverMs = serverTime.checkedMillisecondsSince1970, serverMs >= 0, serverMs < 253_402_300_800_000 else {
            throw CountdownError(.invalidArgument, "invalid server time \(serverTime.described): must be between 1970 and 9999")
        }
        let clock = configuration.clock
        let tolerance = configuration.clockEditTolerance.milliseconds
        let forwardLimit = Self.calibrationForwardLimit.milliseconds
        let time = try await writing(movesCheckpoint: true) { tx, time in
            guard var checkpoint = try tx.checkpoint() else { return time.clocks }
            try time.requireCheckpointAtNow()
            let difference = serverMs - time.wall
            if !force && (difference < -tolerance || difference > forwardLimit) {
                throw CountdownError.calibrationNeedsForce(serverMs: serverMs, wallMs: time.wall, differenceMs: difference)
            }
            let reading = try tx.clockReading(ClockReading(clock))
            let previousOffset = checkpoint.calibrationOffset
            let shift = serverMs - checkpoint.heartbeatAt
            checkpoint.calibrationOffset = serverMs - reading.system
            checkpoint.calibratedAt = serverMs
            checkpoint.heartbeatAt = serverMs
            checkpoint.heartbeatBoot = reading.boot
            checkpoint.bootID = reading.bootID
            checkpoint.clockSkew = 0
            try tx.save(checkpoint, creating: false)
            var lease = try tx.lease()
            if lease.holder != nil {
                lease.expiresAtMs += shift  // the lease lasts as long as it did, on the moved clock
                try tx.save(lease)
            }
            let calibrated = StoreTime(wall: max(checkpoint.wallFloor, serverMs), active: time.active, gap: time.gap)
            try tx.append(
                EventRecord(
                    .calibrated, at: calibrated,
                    detail: ["offset_ms": checkpoint.calibrationOffset, "previous_offset_ms": previousOffset,
                             "wall_before_ms": time.wall]))
            try self.remember(tx)
            return calibrated
        }
        state.withLock { memory in
            // The wall clock may now legitimately read below the old floor's unfloored base; keep the floor itself.
            memory.floor = memory.floor.map { time.notBelow($0) } ?? time
        }
        return time
    }

    /// Writes a final heartbeat and gives up the lease if this instance holds it, so that another
    /// process's ticker can take over at once. The ticker calls this when it stops.
    public func releaseLease() async throws(CountdownError) {
        // An instance that never took the lease has nothing to give up and writes nothing.
        guard state.withLock({ $0.tookLease }) else { return }
        let me = instanceID
        try await writing(notifies: false, movesCheckpoint: true) { tx, time in
            var lease = try tx.lease()
            if lease.holder == me {
                // Giving it up turns the time since the checkpoint into background gap for every
                // reader: the checkpoint must be now.
                try time.requireCheckpointAtNow()
                lease.holder = nil
                lease.expiresAtMs = time.wall
                try tx.save(lease)
                try self.remember(tx)
            }
        }
    }

    /// Writes a final heartbeat, gives up the lease if this instance holds it, and closes the
    /// database if the store opened it. The store must not be used afterwards, except for
    /// ``checkpointWAL()`` on a database the host shares with it.
    ///
    /// It returns within the lease duration (at least a second) plus a moment, whatever the
    /// database does. Where the database cannot be reached (a lost connection to a PostgreSQL
    /// server, a server that does not answer, another process's lock held all that time), the
    /// store still closes, with a warning naming what it could not write: its lease and the
    /// claims of its event readers run out by themselves. Operations still waiting on the
    /// database then are abandoned (they fail), and the database closes once they have ended.
    public func close() async throws(CountdownError) {
        try await close(by: StopDeadline(bound: stopBound))
    }

    /// ``close()`` giving up at `stop`'s deadline (started now unless it has started): the
    /// `countdown run` tool closes by the deadline of the stop its signal began.
    package func close(by stop: StopDeadline) async throws(CountdownError) {
        guard !state.withLock({ memory in defer { memory.closed = true }; return memory.closed }) else { return }
        stop.start()
        let consumers = claimedConsumers()
        let holdsLease = state.withLock { $0.tookLease }
        let claimsReleased = Locked(false)
        let writes = Task {
            try await self.releaseClaims()
            claimsReleased.withLock { $0 = true }
            try await self.releaseLease()
        }
        switch await BoundedWait.result(of: writes, by: stop, passingCancellation: false) {
        case .success?:
            break
        case .failure(let failure)?:
            let error = CountdownError(storage: failure, path: path)
            guard error.isTransient else { throw error }
            warnUnwritten(consumers: consumers, claimsReleased: claimsReleased.withLock { $0 }, lease: holdsLease,
                          why: "the database cannot be reached", error: error)
        case nil:
            warnUnwritten(consumers: consumers, claimsReleased: claimsReleased.withLock { $0 }, lease: holdsLease,
                          why: "no answer from the database within \(stop.bound)", error: nil)
        }
        let underWay = using.refuseNew()
        if underWay > 0 {
            let drained = await BoundedWait.result(of: Task { await using.drained() }, by: stop, passingCancellation: false)
            if drained == nil {
                // The database does not answer: their waits give up, and the database closes once
                // they have ended, without this call waiting any longer.
                configuration.logger.warning(
                    "closing without waiting any longer for operations the database did not answer; they fail",
                    metadata: ["operations": "\(underWay)", "bound": "\(stop.bound)"])
                engine.abandonWaits()
                let (using, engine, logger) = (using, engine, configuration.logger)
                Task {
                    await using.drained()
                    do {
                        try engine.close()
                    } catch {
                        logger.warning("could not close the database", metadata: ["error": "\(error)"])
                    }
                }
                return
            }
        }
        try translatingErrorsNow(path: path) { try engine.close() }
    }

    /// Logs, as a warning, what closing could not write: the claims of `consumers` (unless
    /// released) and the final heartbeat that gives up the lease (if this instance took it).
    private func warnUnwritten(consumers: [String], claimsReleased: Bool, lease: Bool, why: String, error: CountdownError?) {
        var unwritten: [String] = []
        if !consumers.isEmpty && !claimsReleased {
            unwritten.append("give up the claims of consumer\(consumers.count == 1 ? "" : "s") \(consumers.joined(separator: ", "))")
        }
        if lease || unwritten.isEmpty { unwritten.append("write the final heartbeat and give up the lease") }
        var metadata: Logger.Metadata = [:]
        if let error { metadata["error"] = "\(error)" }
        configuration.logger.warning(
            "could not \(unwritten.joined(separator: " or ")) while closing (\(why)); they run out by themselves",
            metadata: metadata)
    }
}
