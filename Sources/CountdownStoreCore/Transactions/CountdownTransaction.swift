import Foundation

/// The store's writes inside a transaction the host holds: a countdown starts (or an expiry is
/// acknowledged) in the same transaction as the host's own rows, and commits or rolls back with
/// them.
///
/// Each engine's library hands one out for its kind of transaction: for the embedded database,
/// `CountdownStore.transaction(in:)` with the host's connection inside its own write; for a
/// database server, `CountdownStore.transaction(on:_:)` on the host's connection. Use it only
/// inside that transaction, and only from one thread at a time.
///
/// Each call returns exactly what the same call on the store returns alone: the clocks move to
/// now, due expiries are recorded on the way, and the item is written with its event. A call
/// that refuses (a bad key, a countdown already running) throws and leaves nothing of itself
/// in the transaction, which stays usable. What follows a write (waking the ticker, event
/// streams, the app model's updates, the metrics) happens only once the host's transaction
/// commits; a rollback leaves no trace.
///
/// The store never holds the host's transaction open beyond a call, and never commits it.
public final class CountdownTransaction: @unchecked Sendable {
    // `@unchecked Sendable`: used inside one transaction, by one thread at a time (the
    // documented contract, as for the engine's connection it wraps).

    /// The store the writes go to.
    public let store: CountdownStore
    private let rows: any RepositoryWriting
    /// Called after each write (an engine that batches statements sends what is left).
    private let afterEachWrite: () throws -> Void
    /// What the writes so far do once the transaction commits.
    private var effects: [(operation: WriteOperation, duration: Duration, tally: EventTally?)] = []
    /// Whether waiters (the ticker, event streams) look again once the transaction commits.
    private var wakesWaiters = false

    package init(store: CountdownStore, rows: any RepositoryWriting, afterEachWrite: @escaping () throws -> Void = {}) {
        self.store = store
        self.rows = rows
        self.afterEachWrite = afterEachWrite
    }

    /// Runs `plan` in the host's transaction, in a savepoint: a refusal or a failure leaves
    /// nothing of it, and the transaction goes on.
    func perform<T: Sendable>(_ plan: WritePlan<T>) throws(CountdownError) -> T {
        let started = ContinuousClock.now
        let metered = store.metrics.enabled
        let (store, rows) = (store, rows)
        let committed: CommittedWrite<T> = try translatingErrorsNow(path: store.path) {
            try rows.savepoint {
                let end = try store.attempt(
                    in: rows, movingCheckpoint: plan.operation.movesCheckpoint,
                    expiryLimit: max(1, store.configuration.writeExpiryBatch),
                    leavingExpiriesToHolder: plan.leavesExpiriesToHolder, metered: metered
                ) { tx, now, _ in
                    try plan.body(tx, now)
                }
                // Only the clock operations leave the checkpoint behind a backlog, and none runs here.
                guard case .commit(.committed(let committed)) = end else {
                    throw CountdownError(
                        .storageFailure, "the store's clock could not move to now in the host's transaction")
                }
                try afterEachWrite()
                return committed
            }
        }
        effects.append((plan.operation, ContinuousClock.now - started, committed.tally))
        wakesWaiters = wakesWaiters || plan.notifies || committed.expired
        return committed.value
    }

    /// What an engine calls once the host's transaction has committed: the ticker and the event
    /// streams look again, and the metrics count the writes.
    package func committed() {
        guard !effects.isEmpty else { return }
        if wakesWaiters { store.changes.bump() }
        if store.metrics.enabled {
            for effect in effects {
                store.metrics.committed(effect.operation, duration: effect.duration, tally: effect.tally)
            }
        }
        effects = []
        wakesWaiters = false
    }

    /// What an engine calls once the host's transaction has rolled back: nothing happened.
    package func rolledBack() {
        effects = []
        wakesWaiters = false
    }

    // MARK: - The operations

    /// ``CountdownStore/start(_:duration:group:policy:payload:whenActive:)``, in the host's transaction.
    @discardableResult
    public func start(
        _ key: String, duration: Duration, group: String? = nil, policy: CountdownPolicy = .wall,
        payload: CountdownPayload? = nil, whenActive: WhenActive = .refuse
    ) throws(CountdownError) -> Countdown {
        try perform(
            CountdownStore.startPlan(
                key, duration: duration, group: group, policy: policy, payload: payload, whenActive: whenActive))
    }

    /// ``CountdownStore/start(_:endingAt:group:policy:payload:whenActive:)``, in the host's transaction.
    @discardableResult
    public func start(
        _ key: String, endingAt deadline: Date, group: String? = nil, policy: CountdownPolicy = .wall,
        payload: CountdownPayload? = nil, whenActive: WhenActive = .refuse
    ) throws(CountdownError) -> Countdown {
        try perform(
            CountdownStore.startPlan(
                key, endingAt: deadline, group: group, policy: policy, payload: payload, whenActive: whenActive))
    }

    /// ``CountdownStore/start(_:whenActive:)``, in the host's transaction.
    @discardableResult
    public func start(_ requests: [CountdownRequest], whenActive: WhenActive = .refuse) throws(CountdownError)
        -> [Countdown]
    {
        try perform(CountdownStore.startPlan(requests, whenActive: whenActive))
    }

    /// ``CountdownStore/startStopwatch(_:group:policy:payload:whenActive:)``, in the host's transaction.
    @discardableResult
    public func startStopwatch(
        _ key: String, group: String? = nil, policy: CountdownPolicy = .wall, payload: CountdownPayload? = nil,
        whenActive: WhenActive = .refuse
    ) throws(CountdownError) -> Countdown {
        try perform(
            CountdownStore.stopwatchPlan(key, group: group, policy: policy, payload: payload, whenActive: whenActive))
    }

    /// ``CountdownStore/cooldown(_:duration:group:policy:payload:)``, in the host's transaction.
    public func cooldown(
        _ key: String, duration: Duration, group: String? = nil, policy: CountdownPolicy = .wall,
        payload: CountdownPayload? = nil
    ) throws(CountdownError) -> CooldownOutcome {
        try perform(
            CountdownStore.cooldownPlan(key, duration: duration, group: group, policy: policy, payload: payload))
    }

    /// ``CountdownStore/debounce(_:quiet:maxWait:group:policy:payload:)``, in the host's transaction.
    @discardableResult
    public func debounce(
        _ key: String, quiet: Duration, maxWait: Duration, group: String? = nil, policy: CountdownPolicy = .wall,
        payload: CountdownPayload? = nil
    ) throws(CountdownError) -> Countdown {
        try perform(
            CountdownStore.debouncePlan(
                key, quiet: quiet, maxWait: maxWait, group: group, policy: policy, payload: payload))
    }

    /// ``CountdownStore/pause(_:)``, in the host's transaction.
    @discardableResult
    public func pause(_ key: String) throws(CountdownError) -> Countdown {
        try perform(CountdownStore.pausePlan(key)).get()
    }

    /// ``CountdownStore/resume(_:)``, in the host's transaction.
    @discardableResult
    public func resume(_ key: String) throws(CountdownError) -> Countdown {
        try perform(CountdownStore.resumePlan(key)).get()
    }

    /// ``CountdownStore/cancel(_:)``, in the host's transaction.
    @discardableResult
    public func cancel(_ key: String) throws(CountdownError) -> Countdown {
        try perform(CountdownStore.cancelPlan(key)).get()
    }

    /// ``CountdownStore/restart(_:)``, in the host's transaction.
    @discardableResult
    public func restart(_ key: String) throws(CountdownError) -> Countdown {
        try perform(CountdownStore.restartPlan(key)).get()
    }

    /// ``CountdownStore/extend(_:by:)``, in the host's transaction.
    @discardableResult
    public func extend(_ key: String, by amount: Duration) throws(CountdownError) -> Countdown {
        try perform(CountdownStore.extendPlan(key, by: amount)).get()
    }

    /// ``CountdownStore/shorten(_:by:)``, in the host's transaction.
    @discardableResult
    public func shorten(_ key: String, by amount: Duration) throws(CountdownError) -> Countdown {
        try perform(CountdownStore.shortenPlan(key, by: amount)).get()
    }

    /// ``CountdownStore/remove(_:)``, in the host's transaction.
    @discardableResult
    public func remove(_ key: String) throws(CountdownError) -> Countdown {
        try perform(CountdownStore.removePlan(key)).get()
    }

    /// Acknowledges `event`, which a reader of `consumer` was given, in the host's transaction:
    /// the handler's own writes in this transaction and the acknowledgement commit together, or
    /// neither does. Fenced as ``EventConsumer/acknowledge(_:)`` is, it throws when the reader
    /// no longer holds the claim on `event` (another reader took it over): roll the transaction
    /// back then, and the handler's writes go with it.
    ///
    /// - Throws: ``CountdownError/Code/claimLost`` when the claim was lost (nothing of the
    ///   acknowledgement was written), or ``CountdownError/Code/invalidArgument`` for an event
    ///   that no reader of a named consumer was given.
    public func acknowledge(_ event: CountdownEvent, of consumer: EventConsumer) throws(CountdownError) {
        guard let claimant = event.claimant else {
            throw CountdownError(
                .invalidArgument,
                "event \(event.id) was not given to a reader of consumer \(quoted(consumer.name)): "
                    + "nothing to acknowledge")
        }
        guard try perform(store.acknowledgePlan(consumer: consumer.name, eventID: event.id, claimant: claimant)) else {
            throw CountdownError(
                .claimLost,
                "the claim on event \(event.id) of consumer \(quoted(consumer.name)) was lost: another reader took "
                    + "it over; roll the transaction back")
        }
    }
}
