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

    private let state = Locked(State())

    private struct State {
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
            }
        }
        let upkeep = try store.startUpkeep()
        state.withLock { $0.upkeep = upkeep }
        let store = self.store
        let logger = store.configuration.logger
        // The stop's deadline, from the cancellation (or graceful shutdown) on: the loop's last
        // operation and the final heartbeat are waited for until then, not longer.
        let stop = StopDeadline(bound: store.stopBound)
        let work = Task {
            try await withThrowingTaskGroup(of: Bool.self) { tasks in
                if store.engine.pushesForeignChanges {
                    // Other hosts' writes, as the database announces them: look again at once.
                    tasks.addTask {
                        await store.engine.watchForeignChanges(clock: store.configuration.clock) {
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
        if let upkeep {
            _ = await BoundedWait.result(of: Task { await upkeep.stop() }, by: stop, passingCancellation: false)
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
                "could not write the final heartbeat and give up the countdown lease: no answer from the database within the stop's bound; it runs out by itself",
                metadata: ["bound": "\(stop.bound)"])
        }
        if let failure { throw failure }
    }

    // MARK: - The loop

    private func loop(upkeep: (any EngineUpkeep)?) async throws {
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

        while true {
            try Task.checkCancellation()
            let passBoot = clock.bootMilliseconds
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
                if holding == true, let due = dueBoot, clock.bootMilliseconds >= due {
                    // Record the oldest due expiries, one short transaction of at most
                    // `expiryBatchSize`: a backlog of any size is a stream of these, each
                    // committed (and delivered) before the next, other writes going between.
                    // The first batch after a quiet spell is small, so that the first expiries
                    // reach consumers at once; each full one doubles the next, up to the size.
                    let recorded = try await store.expireDueBatch(limit: batch)
                    retry.succeeded(logger)
                    if recorded >= batch {
                        // More are due: the next batch at once, without looking for the next
                        // deadline, after a pause for other processes' writes and the upkeep.
                        batch = min(batch * 2, store.configuration.expiryBatchSize)
                        seenVersion = store.changes.version
                        await upkeep?.betweenBatches()
                        await store.leaveWritesToOthers()
                        continue
                    }
                    batch = Self.firstBatch
                    if recorded > 0 { continue }  // the expiries bumped the version: look at the next deadline
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
            if let dueBoot { wake = min(wake, dueBoot) }
            if let nextTick { wake = min(wake, nextTick) }
            upkeep?.idle(untilNextDeadlineMs: dueBoot.map { $0 - clock.bootMilliseconds })
            markAsleep(until: wake, version: seenVersion)
            defer { markAwake() }
            try await store.changes.wait(after: seenVersion, orUntilBoot: wake, on: clock)
        }
    }

    /// The size of the first batch of expiries after a quiet spell (at most the configured size).
    static let firstBatch = 16

    // MARK: - Retention

    /// While this ticker holds the lease, applies ``CountdownStore/Configuration/retention``
    /// every ``CountdownStore/Retention/interval`` (the first pass soon after the lease is
    /// taken), in batches; returns at once when the retention keeps everything.
    private func retainWhileHolding() async throws {
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
    private var isHolding: Bool {
        if case .held = leaseStatus { return true }
        return false
    }

    /// One retention pass; a failure is logged, and the next pass tries again.
    private func retainOnce() async {
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
    private func gaugeWhileHolding() async throws {
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

    // MARK: - Display ticks

    /// Remaining time of the items with `keys`, every `interval`, on aligned instants.
    ///
    /// All subscriptions with the same interval fire on the same instant (a whole multiple of
    /// the interval on the store wall clock), so labels change in lockstep. Ticks are computed
    /// in memory from items read once per change, not by a query per tick. Cancelling the
    /// consuming task ends the subscription. Ticks flow while ``run()`` runs.
    ///
    /// - Throws: ``CountdownError`` for an invalid key or an interval outside 1 ms to 1 day.
    public func ticks(keys: [String], every interval: Duration = .seconds(1)) throws(CountdownError) -> AsyncStream<
        TickSnapshot
    > {
        var valid = Set<String>()
        for key in keys { valid.insert(try Validate.key(key)) }
        return try subscribe(.keys(valid), every: interval)
    }

    /// Remaining time of the running and paused items of `group` (of every group when `nil`),
    /// every `interval`, on aligned instants. See ``ticks(keys:every:)``.
    public func ticks(group: String?, every interval: Duration = .seconds(1)) throws(CountdownError) -> AsyncStream<
        TickSnapshot
    > {
        try subscribe(.group(try Validate.group(group)), every: interval)
    }

    private func subscribe(_ selection: TickSelection, every interval: Duration) throws(CountdownError) -> AsyncStream<
        TickSnapshot
    > {
        let intervalMs = interval.milliseconds
        guard intervalMs >= 1, intervalMs <= 86_400_000 else {
            throw CountdownError(.invalidArgument, "invalid tick interval \(interval): must be between 1ms and 1 day")
        }
        let (stream, continuation) = AsyncStream.makeStream(of: TickSnapshot.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state in
            state.nextSubscription += 1
            state.subscriptions[state.nextSubscription] = TickSubscription(
                selection: selection, intervalMs: intervalMs, nextWall: nil, continuation: continuation)
            state.tickItemsStale = true
            return state.nextSubscription
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscriptions.removeValue(forKey: id) }
        }
        store.changes.bump()  // wake the loop to schedule the first tick
        return stream
    }

    /// Sends every tick that is due; returns the boot instant of the next one.
    ///
    /// The items each subscription follows are picked out once per change; a tick only computes
    /// their figures at one instant and orders them (by a sort of small keys, not of records).
    private func emitTicks() async throws -> Int64? {
        let (empty, stale, selections) = state.withLock { state in
            (state.subscriptions.isEmpty, state.tickItemsStale, state.subscriptions.values.map(\.selection))
        }
        if empty { return nil }
        if stale {
            let items = try await store.tickItems(for: selections)
            let byKey = Dictionary(items.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
            let inKeyOrder = byKey.values.sorted { $0.key < $1.key }
            state.withLock { state in
                for (id, var subscription) in state.subscriptions {
                    subscription.items = inKeyOrder.filter { subscription.selection.includes($0) }
                    state.subscriptions[id] = subscription
                }
                state.tickItemsStale = false
            }
        }
        guard let now = store.cachedTime() else { return nil }
        let time = now.clocks
        let boot = store.configuration.clock.bootMilliseconds
        // Subscriptions due now, taken out of the lock so their figures are computed without it.
        let due = state.withLock { state -> [(id: UInt64, subscription: TickSubscription)] in
            var due: [(id: UInt64, subscription: TickSubscription)] = []
            for (id, var subscription) in state.subscriptions {
                let aligned = (time.wall / subscription.intervalMs + 1) * subscription.intervalMs
                guard let next = subscription.nextWall else {
                    subscription.nextWall = aligned
                    state.subscriptions[id] = subscription
                    continue
                }
                if time.wall >= next {
                    subscription.nextWall = aligned
                    state.subscriptions[id] = subscription
                    due.append((id, subscription))
                }
            }
            return due
        }
        for (_, subscription) in due {
            var tickTime = time
            tickTime.wall = time.wall - time.wall % subscription.intervalMs  // the aligned instant
            subscription.continuation.yield(
                TickSnapshot(time: tickTime, items: Self.figures(subscription.items, at: now)))
        }
        return state.withLock { state -> Int64? in
            state.subscriptions.values.compactMap(\.nextWall).map { boot + $0 - time.wall }.min()
        }
    }

    /// `items` (in key order) with their figures at `time`, soonest to expire first, stopwatches
    /// last, ties in key order.
    private static func figures(_ items: [ItemRecord], at time: Now) -> [Countdown] {
        var order: [(sort: Int64, index: Int)] = []
        order.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            order.append((item.kind == .stopwatch ? .max : item.sortRemainingMs(at: time), index))
        }
        order.sort { ($0.sort, $0.index) < ($1.sort, $1.index) }
        return order.map { items[$0.index].countdown(at: time) }
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

    private func markAsleep(until wake: Int64, version: UInt64) {
        let woken = state.withLock { state in
            state.asleep = (wake, version)
            defer { state.idleWaiters.removeAll() }
            return state.idleWaiters
        }
        woken.forEach { $0.resume(returning: false) }  // each waiter looks again
    }

    private func markAwake() {
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
