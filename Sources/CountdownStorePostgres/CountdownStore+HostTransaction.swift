import CountdownStoreCore
import Foundation
import PostgresNIO

// The store's writes inside a transaction on the host's own PostgreSQL connection.
extension CountdownStore {
    /// Runs `body` in one transaction on the host's `connection` (a connection of the store's
    /// database, which the host also uses for its own tables): the store's writes through the
    /// ``PostgresCountdownTransaction`` it is given, and the host's own statements on
    /// `connection`, commit together when `body` returns, or roll back together when it throws.
    ///
    /// ```swift
    /// try await store.transaction(on: connection) { tx in
    ///     try await connection.query("INSERT INTO orders (id, total) VALUES (\(id), \(total))", logger: logger)
    ///     try await tx.start("order-\(id)", duration: .seconds(15 * 60), group: "payments")
    /// }   // the order and its deadline commit together, or neither does
    /// ```
    ///
    /// Each of the store's calls returns what it would return alone. The ticker, event streams
    /// and metrics hear of the writes once the transaction commits (other hosts by the commit's
    /// notification); a rollback leaves no trace. Do not run anything else on `connection`
    /// meanwhile, and do not begin or end transactions in `body`.
    ///
    /// - Throws: what `body` throws, after the rollback; ``CountdownError`` when the transaction
    ///   cannot begin or commit, or for a store on another engine.
    public func transaction<T: Sendable>(
        on connection: PostgresConnection, _ body: (PostgresCountdownTransaction) async throws -> T
    ) async throws -> T {
        guard let engine = engine as? PostgresEngine else {
            throw CountdownError(
                .wrongState, "this store is not on PostgreSQL: it cannot join a PostgreSQL transaction")
        }
        let watch = StatementWatch(engine.abandonment, answerBoundMs: engine.answerBoundMs)
        let rows = PostgresTransaction(engine: engine, connection: connection, writing: true, watch: watch)
        let core = CountdownTransaction(store: self, rows: rows) {
            // What the store batches until the end of a transaction goes now: the host commits.
            try rows.finish()
            try rows.takeUnanswered()
        }
        let place = engine.place
        try await Self.onThread(place) {
            // Both in one round trip: the host's statements come after them on the connection.
            try rows.sendUnanswered("BEGIN ISOLATION LEVEL READ COMMITTED", isBegin: true)
            if engine.syncsEveryCommit { try rows.sendUnanswered("SET LOCAL synchronous_commit = on", isBegin: true) }
            try rows.takeUnanswered()
        }
        let value: T
        do {
            value = try await body(PostgresCountdownTransaction(core, place: place))
        } catch {
            try? await Self.onThread(place) { try rows.execute("ROLLBACK") }
            core.rolledBack()
            throw error
        }
        do {
            try await Self.onThread(place) { try rows.execute("COMMIT") }
        } catch {
            core.rolledBack()
            throw error
        }
        core.committed()
        return value
    }

    /// Runs `body` on a transaction thread of the engine (its statements block while they wait).
    static func onThread<T: Sendable>(_ place: String, _ body: @escaping @Sendable () throws -> T)
        async throws(CountdownError) -> T
    {
        do {
            return try await TransactionThread.run(body)
        } catch let error as CountdownError {
            throw error
        } catch {
            throw CountdownError(storage: PostgresFailure(error, place: place), path: nil)
        }
    }
}

/// The store's writes inside a transaction on the host's PostgreSQL connection (see
/// ``CountdownStore/transaction(on:_:)``): the calls of ``CountdownTransaction``, each waited
/// for on a thread of the store's own while the host's task waits.
public struct PostgresCountdownTransaction: Sendable {
    /// The same calls, synchronous.
    let core: CountdownTransaction
    let place: String

    init(_ core: CountdownTransaction, place: String) {
        self.core = core
        self.place = place
    }

    private func run<T: Sendable>(_ body: @escaping @Sendable (CountdownTransaction) throws -> T)
        async throws(CountdownError) -> T
    {
        let core = core
        return try await CountdownStore.onThread(place) { try body(core) }
    }

    /// ``CountdownStore/start(_:duration:group:policy:payload:whenActive:)``, in the transaction.
    @discardableResult
    public func start(
        _ key: String, duration: Duration, group: String? = nil, policy: CountdownPolicy = .wall,
        payload: CountdownPayload? = nil, whenActive: WhenActive = .refuse
    ) async throws(CountdownError) -> Countdown {
        try await run {
            try $0.start(
                key, duration: duration, group: group, policy: policy, payload: payload, whenActive: whenActive)
        }
    }

    /// ``CountdownStore/start(_:endingAt:group:policy:payload:whenActive:)``, in the transaction.
    @discardableResult
    public func start(
        _ key: String, endingAt deadline: Date, group: String? = nil, policy: CountdownPolicy = .wall,
        payload: CountdownPayload? = nil, whenActive: WhenActive = .refuse
    ) async throws(CountdownError) -> Countdown {
        try await run {
            try $0.start(
                key, endingAt: deadline, group: group, policy: policy, payload: payload, whenActive: whenActive)
        }
    }

    /// ``CountdownStore/start(_:whenActive:)``, in the transaction.
    @discardableResult
    public func start(_ requests: [CountdownRequest], whenActive: WhenActive = .refuse) async throws(CountdownError)
        -> [Countdown]
    {
        try await run { try $0.start(requests, whenActive: whenActive) }
    }

    /// ``CountdownStore/startStopwatch(_:group:policy:payload:whenActive:)``, in the transaction.
    @discardableResult
    public func startStopwatch(
        _ key: String, group: String? = nil, policy: CountdownPolicy = .wall, payload: CountdownPayload? = nil,
        whenActive: WhenActive = .refuse
    ) async throws(CountdownError) -> Countdown {
        try await run {
            try $0.startStopwatch(key, group: group, policy: policy, payload: payload, whenActive: whenActive)
        }
    }

    /// ``CountdownStore/cooldown(_:duration:group:policy:payload:)``, in the transaction.
    public func cooldown(
        _ key: String, duration: Duration, group: String? = nil, policy: CountdownPolicy = .wall,
        payload: CountdownPayload? = nil
    ) async throws(CountdownError) -> CooldownOutcome {
        try await run { try $0.cooldown(key, duration: duration, group: group, policy: policy, payload: payload) }
    }

    /// ``CountdownStore/debounce(_:quiet:maxWait:group:policy:payload:)``, in the transaction.
    @discardableResult
    public func debounce(
        _ key: String, quiet: Duration, maxWait: Duration, group: String? = nil, policy: CountdownPolicy = .wall,
        payload: CountdownPayload? = nil
    ) async throws(CountdownError) -> Countdown {
        try await run {
            try $0.debounce(key, quiet: quiet, maxWait: maxWait, group: group, policy: policy, payload: payload)
        }
    }

    /// ``CountdownStore/pause(_:)``, in the transaction.
    @discardableResult
    public func pause(_ key: String) async throws(CountdownError) -> Countdown {
        try await run { try $0.pause(key) }
    }

    /// ``CountdownStore/resume(_:)``, in the transaction.
    @discardableResult
    public func resume(_ key: String) async throws(CountdownError) -> Countdown {
        try await run { try $0.resume(key) }
    }

    /// ``CountdownStore/cancel(_:)``, in the transaction.
    @discardableResult
    public func cancel(_ key: String) async throws(CountdownError) -> Countdown {
        try await run { try $0.cancel(key) }
    }

    /// ``CountdownStore/restart(_:)``, in the transaction.
    @discardableResult
    public func restart(_ key: String) async throws(CountdownError) -> Countdown {
        try await run { try $0.restart(key) }
    }

    /// ``CountdownStore/extend(_:by:)``, in the transaction.
    @discardableResult
    public func extend(_ key: String, by amount: Duration) async throws(CountdownError) -> Countdown {
        try await run { try $0.extend(key, by: amount) }
    }

    /// ``CountdownStore/shorten(_:by:)``, in the transaction.
    @discardableResult
    public func shorten(_ key: String, by amount: Duration) async throws(CountdownError) -> Countdown {
        try await run { try $0.shorten(key, by: amount) }
    }

    /// ``CountdownStore/remove(_:)``, in the transaction.
    @discardableResult
    public func remove(_ key: String) async throws(CountdownError) -> Countdown {
        try await run { try $0.remove(key) }
    }

    /// ``CountdownTransaction/acknowledge(_:of:)``: the acknowledgement commits with the
    /// handler's own writes in this transaction, or neither does.
    public func acknowledge(_ event: CountdownEvent, of consumer: EventConsumer) async throws(CountdownError) {
        try await run { try $0.acknowledge(event, of: consumer) }
    }
}
