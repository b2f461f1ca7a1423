import Foundation
import Logging
import ServiceLifecycle

/// The one timer loop of a store: it expires countdowns when they come due, writes heartbeats,
/// notices other processes' writes, and drives display ticks. There is never a timer per countdown.
///
/// Run it in a `ServiceGroup` beside the host's own services, or on its own:
///
/// ```swift
/// let ticker = CountdownTicker(store: store)
/// let group = ServiceGroup(services: [ticker, myServer], logger: logger)
/// try await group.run()        // or: try await ticker.run() in a task you cancel
/// ```
///
/// Only the ticker holding the store's lease advances the active timeline and records expiries;
/// the others stand by. How it sleeps, wakes and takes over is in the article "Embedding in a
/// host app" (What the ticker does).
public final class CountdownTicker: Service, Sendable {
    /// The store this ticker drives.
    public let store: CountdownStore

    /// How often other processes' writes are looked for.
    static let pollMs: Int64 = 250
    /// The longest sleep.
    static let capMs: Int64 = 1000

    let state = Locked(State())

    struct State {
        var running = false
        var lease: CountdownStore.LeaseStatus?
        var subscriptions: [UInt64: TickSubscription] = [:]
        var nextSubscription: UInt64 = 0
        /// Whether the items the display subscriptions follow must be read again.
        var tickItemsStale = true
        /// While the loop sleeps: until when, and the change version it has handled.
        var asleep: (until: Int64, version: UInt64)?
        var idleWaiters: [CheckedContinuation<Bool, Never>] = []
        /// The engine's upkeep while the ticker runs (the embedded engine's log checkpointer, for a store on
        /// its own file).
        var upkeep: (any EngineUpkeep)?
        /// The boot-clock instant (ms) at which the loop last began a pass; nil while not running.
        var lastPassBoot: Int64?
        /// How many passes the loop has completed since ``run()`` began.
        var completedPasses = 0
    }

    /// A ticker for `store`. It does nothing until ``run()``.
    public init(store: CountdownStore) {
        self.store = store
    }

    /// How many display subscriptions are open.
    public var subscriptionCount: Int { state.withLock { $0.subscriptions.count } }

    /// The engine's upkeep while the ticker runs (on a store's own file: its log checkpointer).
    package var upkeep: (any EngineUpkeep)? { state.withLock { $0.upkeep } }

    /// The lease as of the last heartbeat: whether this ticker is the one advancing time.
    public var leaseStatus: CountdownStore.LeaseStatus? { state.withLock { $0.lease } }

    /// How long ago, on the store's boot clock (`store.configuration.clock`), the timer loop last
    /// began a pass; `nil` while the ticker is not running.
    ///
    /// The loop begins a pass at least once a second while idle, at once after each batch of a
    /// backlog, and at most a second after a lost connection; a pass that waits on the database
    /// (another process's lock, a server that does not answer) lets the age grow. An age well
    /// over a second therefore means a loop that is stuck, which is what a watchdog looks for:
    /// `countdown run` and `countdown serve` stop pinging systemd's watchdog once the age reaches
    /// half the watchdog interval (at least 2 s), so that systemd restarts a hung ticker.
    /// Reading it takes a lock, no database access.
    public var lastPassAge: Duration? {
        guard let last = state.withLock({ $0.lastPassBoot }) else { return nil }
        return .milliseconds(max(0, store.configuration.clock.bootMilliseconds - last))
    }

    /// How many passes of the timer loop have completed since ``run()`` began (a pass: the
    /// heartbeat when due, a look for other processes' writes, the expiries due, the display
    /// ticks); 0 until the first is done and while the ticker is not running.
    ///
    /// Once it is 1 or more, the store is open, the lease decided (``leaseStatus``) and what was
    /// due recorded or being recorded: the moment a host reports itself ready (systemd's
    /// `READY=1`). Reading it takes a lock, no database access.
    public var completedPasses: Int { state.withLock { $0.completedPasses } }

    /// Runs the timer loop until the task is cancelled or the service group shuts down gracefully;
    /// then writes a final heartbeat and frees the lease.
    ///
    /// Once asked to stop it returns within the lease duration (at least a second), whatever the
    /// database does: an operation or a final heartbeat the database has not answered by then
    /// (a server gone or hung, another process's lock held) is left behind, cancelled, with a
    /// warning, and the lease runs out by itself.
    ///
    /// A lost connection to the database (a database server restarting, a terminated session)
    /// does not stop it: it logs a warning and tries again after 0.1 s, then up to 1 s apart,
    /// heartbeat first, not counting itself the lease holder until a heartbeat succeeds.
    ///
    /// - Throws: ``CountdownError`` when the store cannot be read or written for any other
    ///   reason, or when this ticker is already running.
    public func run() async throws {
        let alreadyRunning = state.withLock { state in
            defer { state.running = true }
            return state.running
        }
        if alreadyRunning {
            throw CountdownError(.wrongState, "this ticker is already running")
        }
        defer {
            state.withLock { state in
                state.running = false
                state.lease = nil
                state.lastPassBoot = nil
                state.completedPasses = 0
            }
        }
        let upkeep = try await store.startUpkeep()
        state.withLock { $0.upkeep = upkeep }
        let store = self.store
        let logger = store.configuration.logger
        // The stop's deadline, from the cancellation (or graceful shutdown) on: the loop's last
        // operation and the final heartbeat are waited for until then, not longer.
        let stop = StopDeadline(bound: store.stopBound)
        let work = Task {
            try await withThrowingTaskGroup(of: Bool.self) { tasks in
                if let notices = store.capabilities.changeNotices, notices.pushesForeignChanges {
                    // Other hosts' writes, as the database announces them: look again at once.
                    tasks.addTask {
                        await notices.watchForeignChanges(clock: store.configuration.clock) {
                            store.changes.bump()
                        }
                        return false
                    }
                }
                tasks.addTask {
                    try await self.loop(upkeep: upkeep)
                    return true
                }
                tasks.addTask {
                    try await self.retainWhileHolding()
                    return false
                }
                tasks.addTask {
                    try await self.gaugeWhileHolding()
                    return false
                }
                defer { tasks.cancelAll() }
                while let loopEnded = try await tasks.next(), !loopEnded {}
            }
        }
        let ended = await cancelWhenGracefulShutdown {
            await BoundedWait.result(of: work, by: stop, passingCancellation: true)
        }
        var failure: (any Error)?
        switch ended {
        case .failure(let error)? where !stop.hasStarted && !(error is CancellationError) && !Task.isCancelled:
            failure = error
        case nil:
            logger.warning(
                "the countdown ticker's database work did not end within the stop's bound; left behind, cancelled",
                metadata: ["bound": "\(stop.bound)"])
        default:
            // Cancellation and graceful shutdown end here, whatever the call they interrupted
            // reported (a wait for another process's lock ends with a storage error then).
            break
        }
        stop.start()  // after a failure, the stop begins now
        if upkeep != nil {
            _ = await BoundedWait.result(of: Task { await store.releaseUpkeep() }, by: stop, passingCancellation: false)
        }
        state.withLock { $0.upkeep = nil }
        if let failure {
            logger.error("countdown ticker stopped", metadata: ["error": "\(failure)"])
        }
        // A fresh task: the final heartbeat must be written even though this one is cancelled,
        // unless the database does not answer by the stop's deadline.
        let release = Task { try await store.releaseLease() }
        switch await BoundedWait.result(of: release, by: stop, passingCancellation: false) {
        case .success?:
            break
        case .failure? where failure != nil:
            break  // the ticker's own failure is what it reports
        case .failure(let error)?:
            let error = CountdownError(storage: error, path: store.path)
            if error.isTransient {
                // The database cannot be reached now: the lease runs out by itself.
                logger.warning(
                    "could not write the final heartbeat and give up the countdown lease; it runs out by itself",
                    metadata: ["error": "\(error)"])
            } else {
                throw error
            }
        case nil:
            logger.warning(
                """
                could not write the final heartbeat and give up the countdown lease: \
                no answer from the database within the stop's bound; it runs out by itself
                """,
                metadata: ["bound": "\(stop.bound)"])
        }
        if let failure { throw failure }
    }

    // MARK: - The loop

    func loop(upkeep: (any EngineUpkeep)?) async throws {
        let clock = store.configuration.clock
        let logger = store.configuration.logger
        let heartbeatMs = max(1, store.configuration.heartbeatInterval.milliseconds)
        var nextHeartbeat = Int64.min
        var nextPoll = Int64.min
        var foreignChanges: Int?
        var seenVersion = store.changes.version &- 1
        var dueBoot: Int64?
        var holding: Bool?

        var retry = ConnectionRetry()
        var batch = Self.firstBatch
        // A backlog's pace, and the instant its next batch waits for (the deadline of a quiet
        // group that no batch would end by).
        var pace = BacklogPace()
        var holdUntil: Int64?
        // The next batch's limit when it is cut to end by a quiet group's deadline, and that
        // deadline: the first batch that starts after it is small.
        var limitNext: Int?
        var quietDeadline: Int64?
        var decidedAt: Int64?

        while true {
            try Task.checkCancellation()
            let passBoot = clock.bootMilliseconds
            state.withLock { $0.lastPassBoot = passBoot }
            let version = store.changes.version
            let nextTick: Int64?
            do {
                if passBoot >= nextHeartbeat {
                    let status = try await store.heartbeat()
                    let nowHolding = if case .held = status { true } else { false }
                    if nowHolding != holding {
                        // Said at the first heartbeat too, whichever it is: a ticker that starts beside a
                        // live lease (another process's, or a dead one's not yet run out) stands by.
                        if case .heldElsewhere(let holder, let until) = status {
                            logger.info(
                                "standing by: another process holds the lease",
                                metadata: ["holder": "\(holder)", "until": "\(StoreTime.iso8601(until))"])
                        } else {
                            logger.info("holding the countdown lease")
                        }
                        seenVersion = version &- 1  // the deadlines that matter have changed
                    }
                    holding = nowHolding
                    state.withLock { $0.lease = status }
                    store.metrics.leaseHeld(nowHolding)
                    nextHeartbeat = passBoot + heartbeatMs
                }
                if passBoot >= nextPoll {
                    let current = try await store.foreignChangeToken()
                    if let foreignChanges, current != foreignChanges {
                        store.changes.bump()  // another process wrote: look again now
                    }
                    foreignChanges = current
                    nextPoll = passBoot + Self.pollMs
                }
                if store.changes.version != seenVersion {
                    seenVersion = store.changes.version
                    state.withLock { $0.tickItemsStale = true }
                    dueBoot = holding == true ? try await store.nextDueBoot() : nil
                }
                if holding == true, let due = dueBoot, clock.bootMilliseconds >= max(due, holdUntil ?? due) {
                    // Record the oldest due expiries, one short transaction of at most
                    // `expiryBatchSize`: a backlog of any size is a stream of these, each
                    // committed (and delivered) before the next, other writes going between.
                    // The first batch after a quiet spell is small, so that the first expiries
                    // reach consumers at once; each full one doubles the next, up to the size.
                    let batchStarted = clock.bootMilliseconds
                    // The gap after a decision to go on at once (not after a wait for a deadline).
                    if let decidedAt, holdUntil == nil { pace.observeGap(batchStarted - decidedAt) }
                    (holdUntil, decidedAt) = (nil, nil)
                    var limit = limitNext ?? batch
                    if let quiet = quietDeadline, batchStarted >= quiet {
                        limit = pace.firstAfterDeadline(batch: limit, least: least(pace), now: batchStarted)
                        quietDeadline = nil
                    }
                    limitNext = nil
                    let recorded = try await store.expireDueBatch(limit: limit)
                    retry.succeeded(logger)
                    if recorded >= limit {
                        // More are due: the next batch at once, after a pause for other
                        // processes' writes and the upkeep. When the next deadline still ahead
                        // is of a group with no backlog of its own, the batch ends by then, so
                        // that its countdown is in the batch after it; when no batch would end
                        // by then, the next one waits for it. That batch is small (within a
                        // share of the time), so that the countdown commits soon after.
                        pace.observe(recorded, tookMs: clock.bootMilliseconds - batchStarted)
                        if limit == batch { batch = min(batch * 2, store.configuration.expiryBatchSize) }
                        if let quiet = try await store.nextQuietGroupDeadlineBoot() {
                            let now = clock.bootMilliseconds
                            decidedAt = now
                            // One that passed during this batch is still the next batch's.
                            if (quietDeadline ?? .max) > now { quietDeadline = quiet }
                            switch pace.next(batch: batch, least: least(pace), now: now, quietDeadline: quiet) {
                            case .batch(let size) where size < batch: limitNext = size
                            case .batch: break
                            case .holdUntil(let instant): holdUntil = instant
                            }
                        }
                        seenVersion = store.changes.version
                        passCompleted()
                        await upkeep?.betweenBatches()
                        // Waiting for a deadline lets the others write meanwhile.
                        if holdUntil == nil { await store.leaveWritesToOthers() }
                        continue
                    }
                    batch = Self.firstBatch
                    pace = BacklogPace()
                    quietDeadline = nil
                    if recorded > 0 {
                        // The expiries bumped the version: look at the next deadline.
                        passCompleted()
                        continue
                    }
                    // Nothing to record after all (another host is recording those rows, or
                    // recorded them): wait for its commit or the next poll, not in a loop.
                    dueBoot = nil
                }
                nextTick = try await emitTicks()
                retry.succeeded(logger)
            } catch let error as CountdownError where error.isTransient && !Task.isCancelled {
                // The connection was lost (a server restart, a terminated session): try again
                // after a pause, heartbeat first. Until a heartbeat succeeds this ticker does not
                // count itself the holder; its lease may run out meanwhile, and another
                // process's ticker take it over under a new term.
                let delayMs = retry.failed(error, logger)
                holding = nil
                dueBoot = nil
                holdUntil = nil
                (limitNext, quietDeadline, decidedAt) = (nil, nil, nil)
                pace = BacklogPace()
                nextHeartbeat = Int64.min
                nextPoll = Int64.min
                seenVersion = store.changes.version &- 1
                let wake = clock.bootMilliseconds + delayMs
                let current = store.changes.version
                markAsleep(until: wake, version: current)
                defer { markAwake() }
                // A write of this store (which reached the database) ends the pause early.
                try await store.changes.wait(after: current, orUntilBoot: wake, on: clock)
                continue
            }

            var wake = min(passBoot + Self.capMs, nextHeartbeat, nextPoll)
            if let dueBoot { wake = min(wake, max(dueBoot, holdUntil ?? dueBoot)) }
            if let nextTick { wake = min(wake, nextTick) }
            upkeep?.idle(untilNextDeadlineMs: dueBoot.map { $0 - clock.bootMilliseconds })
            passCompleted()
            markAsleep(until: wake, version: seenVersion)
            defer { markAwake() }
            try await store.changes.wait(after: seenVersion, orUntilBoot: wake, on: clock)
        }
    }

    /// The size of the first batch of expiries after a quiet spell (at most the configured size).
    static let firstBatch = 16
    /// The least work a batch of a backlog is cut to, in milliseconds at the pace of the batch
    /// before, to end by the next deadline of a group with no backlog.
    static let shortestBatchMs = 2.0

    /// The least a batch of a backlog at `pace` is cut to: two milliseconds of work, so that
    /// deadlines every millisecond do not shrink the batches to where the pauses between them
    /// take the time, and the first batch's size.
    func least(_ pace: BacklogPace) -> Int {
        max(Self.firstBatch, Int(Self.shortestBatchMs / max(pace.paceMs, 0.001)))
    }

    // MARK: - Idle, for tests on virtual time

    /// Waits until the loop has handled everything due up to the current boot-clock instant and
    /// every change so far, and is asleep until later. For tests that move a ``VirtualClock`` by
    /// hand; it does not return while the ticker is not running.
    public func waitUntilIdle() async {
        while true {
            let done = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let boot = store.configuration.clock.bootMilliseconds
                let version = store.changes.version
                let idle = state.withLock { state -> Bool in
                    if let asleep = state.asleep, asleep.until > boot, asleep.version == version { return true }
                    state.idleWaiters.append(continuation)
                    return false
                }
                if idle { continuation.resume(returning: true) }
            }
            if done { return }
        }
    }

    /// Counts a pass of the loop done (``completedPasses``).
    func passCompleted() {
        state.withLock { $0.completedPasses += 1 }
    }

    func markAsleep(until wake: Int64, version: UInt64) {
        let woken = state.withLock { state in
            state.asleep = (wake, version)
            defer { state.idleWaiters.removeAll() }
            return state.idleWaiters
        }
        woken.forEach { $0.resume(returning: false) }  // each waiter looks again
    }

    func markAwake() {
        state.withLock { $0.asleep = nil }
    }
}

extension CountdownStore {
    /// The items display subscriptions follow, read in one transaction.
    func tickItems(for selections: [TickSelection]) async throws(CountdownError) -> [ItemRecord] {
        try await reading { tx, _ in
            var keys = Set<String>()
            var groups = Set<String?>()
            for selection in selections {
                switch selection {
                case .keys(let selected): keys.formUnion(selected)
                case .group(let group): groups.insert(group)
                }
            }
            var items = try tx.items(keys: Array(keys))
            if groups.contains(nil) {
                items += try tx.activeItems(group: nil, limit: 100_000)
            } else {
                for case let group? in groups { items += try tx.activeItems(group: group, limit: 100_000) }
            }
            return items
        }
    }
}
