import CountdownStoreCore
import Foundation
import Logging
import PostgresNIO

/// The PostgreSQL engine: the store's transactions on connections of a `PostgresClient`.
///
/// The store's logic is synchronous (SQLite runs it on the calling thread); postgres-nio is
/// not. Each transaction leases a connection, then runs the store's body on a thread of the
/// engine's own, where every statement waits for its result: the body stays one piece of code
/// for both engines, and no thread of Swift's cooperative pool or of the event loops ever blocks.
///
/// Writers run side by side: each locks the rows of the countdowns it changes, and only the few
/// writes that move the checkpoint or the lease lock the `countdown_clock` row. Their events go
/// in last, and readers of events read no further than the first ID a writer still under way
/// may hold, so that IDs are read in order, never a lower one after a higher one (see
/// ``PostgresTransaction/flushEvents()`` and ``PostgresTransaction/eventHorizon()``).
struct PostgresEngine: StorageEngine, DatabaseClockEngine, SideBySideWritingEngine, ChangeNoticeEngine,
    AbandonableEngine, DetailedEngine
{
    /// The server in use and the pool on it (or the host's client).
    let servers: ServerSelection
    /// `"schema".` to put before every table name, or empty for the connection's search path.
    let prefix: String
    /// The schema, as given (for messages and the migrations' search path).
    let schema: String?
    /// Where the store is, for messages: the URL without its password, or "the host's PostgreSQL client".
    let place: String
    let logger: Logger
    /// This engine's boot identity: the host's boot and a token of this engine, so that a boot
    /// clock reading is compared only with readings of the same process.
    let bootScope: String
    /// The estimate of the database's clock from this engine's last reading.
    let serverClock: ServerClockEstimate
    /// Whether the server's clock is the store's system clock (always, but in tests on virtual time).
    let databaseClock: Bool
    /// How this engine learns of other hosts' writes.
    let wakeUps: PostgresWakeUps
    /// How far a reading of the server's clock may be from this host's boot-clock estimate
    /// before it counts as a step of the server's clock (the configuration's clock-edit tolerance).
    let clockStepToleranceMs: Int64
    /// The NOTIFY channel of this store (one per schema).
    let channel: String
    /// The first key of the transaction-scoped advisory locks that this store's writers of
    /// events hold (one per schema; see ``PostgresTransaction/flushEvents()``).
    let eventLockClass: Int32
    /// This host's clocks (the configuration's): the boot clock brackets each reading of the server's.
    let clock: any StoreClock
    /// Whether every write transaction waits for its commit to be flushed, whatever the server's
    /// `synchronous_commit` (``CountdownStore/Durability/full``).
    let syncsEveryCommit: Bool
    /// Called in every write transaction right before its COMMIT (tests hold a writer there).
    let beforeCommit: (@Sendable () -> Void)?
    /// The statements sent most, written for this store's schema.
    let statements: PostgresStatements
    /// Whether the store gave up on the operations under way (it closed without waiting for
    /// them): their statements stop being waited for.
    let abandonment: Locked<Bool>
    /// How long a statement is still waited for once the task that waits for it is cancelled:
    /// the store's stop bound (its lease duration, at least a second).
    let cancelledWaitMs: Int
    /// How long a statement may go unanswered on an open connection before the path to the
    /// server counts as silent (see ``NoAnswer``): four leases, at least 10 s. `nil` while the
    /// schema is brought up to date (a migration may rewrite a large table).
    var answerBoundMs: Int?

    var knownMigrations: [String] { Migration.embedded.map(\.name) }
    /// 64: each write of a group is a subtransaction that writes, and a backend keeps the IDs of
    /// at most 64 of them in shared memory (`PGPROC_MAX_CACHED_SUBXIDS`); past that, every
    /// other session's snapshot looks in `pg_subtrans` while the group's transaction runs.
    var groupedWriteLimit: Int { 64 }
    /// 2: each group holds a connection of the pool while it runs, and two run side by side (the
    /// server commits them sharing its WAL flushes). Fewer groups side by side make each bigger,
    /// and a group's new keys go in with one statement, so bigger groups cost fewer round trips:
    /// with 64 tasks starting countdowns on a 2-core machine, 2 groups side by side started 8,416
    /// a second, 4 started 5,363 and 8 started 4,534 (raw, one transaction per call on 20
    /// connections: about 3,500).
    var concurrentWriteGroups: Int { 2 }

    // MARK: Transactions

    func read<T: Sendable>(_ body: @escaping @Sendable (any RepositoryReading) throws -> T) async throws -> T {
        try await transaction(writing: false) { tx in try body(tx) }
    }

    func write<T: Sendable>(
        _ body: @escaping @Sendable (any RepositoryWriting) throws -> TransactionEnd<T>
    ) async throws -> T {
        try await transaction(writing: true, ending: body)
    }

    /// A read transaction that reads events by ID: the event horizon is computed before its
    /// BEGIN, so that its one snapshot shows every event up to it (see
    /// ``PostgresTransaction/eventHorizon()``).
    func readEvents<T: Sendable>(_ body: @escaping @Sendable (any RepositoryReading) throws -> T) async throws -> T {
        try await transaction(writing: false, eventHorizonFirst: true) { tx in try body(tx) }
    }

    /// How many times a write the server chose as a deadlock's victim is run again.
    static let deadlockRetries = 5

    /// ``transaction(writing:eventHorizonFirst:ending:)`` for a body that always commits.
    func transaction<T: Sendable>(
        writing: Bool, eventHorizonFirst: Bool = false, _ body: @escaping @Sendable (PostgresTransaction) throws -> T
    ) async throws -> T {
        try await transaction(writing: writing, eventHorizonFirst: eventHorizonFirst) { tx in .commit(try body(tx)) }
    }

    /// Runs `body` in one transaction on a leased connection, on a thread of the engine's own,
    /// and commits it or rolls it back as `body` says.
    ///
    /// Writers run side by side and lock the rows of the countdowns they change; two that lock
    /// the same rows in different orders (bulk operations over overlapping keys) deadlock, and
    /// the server rolls one back: that one runs again, up to ``deadlockRetries`` times.
    func transaction<T: Sendable>(
        writing: Bool, eventHorizonFirst: Bool = false,
        ending body: @escaping @Sendable (PostgresTransaction) throws -> TransactionEnd<T>
    ) async throws -> T {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await attemptTransaction(writing: writing, eventHorizonFirst: eventHorizonFirst, body)
            } catch let error as PostgresFailure where writing && error.isDeadlock && attempt <= Self.deadlockRetries {
                logger.debug(
                    "a write was rolled back by a deadlock; running it again", metadata: ["attempt": "\(attempt)"])
            } catch let error as PostgresFailure where ServerSelection.isReadOnly(error.error) && attempt == 1 {
                // The server refused the write as read-only (a standby, or a demoted primary):
                // nothing was written, and the next attempt runs on the server picked again.
                logger.info(
                    "the database server refused a write as read-only; trying the servers again",
                    metadata: ["error": "\(error)"])
            } catch let failed as BeginFailed {
                // The pool handed over a connection the server had already closed (a terminated
                // session, a restart): nothing ran, so once more on another.
                guard failed.failure.isTransient, attempt == 1, !(failed.failure.error is WaitAbandoned) else {
                    throw failed.failure
                }
                logger.debug(
                    "a pooled connection was closed; beginning again on another",
                    metadata: ["error": "\(failed.failure)"])
            }
        }
    }

    private func attemptTransaction<T: Sendable>(
        writing: Bool, eventHorizonFirst: Bool,
        _ body: @escaping @Sendable (PostgresTransaction) throws -> TransactionEnd<T>
    ) async throws -> T {
        let watch = StatementWatch(abandonment, answerBoundMs: answerBoundMs)
        do {
            return try await withTaskCancellationHandler {
                try await servers.withConnection { connection in
                    try await TransactionThread.run {
                        let tx = PostgresTransaction(
                            engine: self, connection: connection, writing: writing, watch: watch)
                        if eventHorizonFirst {
                            do {
                                tx.horizon = try tx.computeEventHorizon()
                            } catch {
                                // Nothing ran yet, as for a failed BEGIN.
                                throw BeginFailed(failure: PostgresFailure(error, place: place))
                            }
                        }
                        // Sent without waiting: it runs before the body's first statement, whose
                        // wait takes its result first.
                        try tx.sendUnanswered(
                            writing
                                ? "BEGIN ISOLATION LEVEL READ COMMITTED"
                                : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
                            isBegin: true)
                        if writing && syncsEveryCommit {
                            // Pipelined with the BEGIN: no round trip of its own.
                            try tx.sendUnanswered("SET LOCAL synchronous_commit = on", isBegin: true)
                        }
                        do {
                            let end = try body(tx)
                            guard end.commits else {
                                try tx.execute("ROLLBACK")
                                return end.value
                            }
                            if writing {
                                try tx.finish()
                                if let beforeCommit {
                                    try tx.takeUnanswered()
                                    beforeCommit()
                                }
                            }
                            try tx.execute("COMMIT")
                            return end.value
                        } catch let error as BeginFailed {
                            throw error
                        } catch {
                            try? tx.execute("ROLLBACK")
                            throw error
                        }
                    }
                }
            } onCancel: {
                // A statement the database does not answer is not waited for without end.
                watch.giveUp(afterMs: cancelledWaitMs)
            }
        } catch let error as CountdownError {
            throw error
        } catch let error as PostgresFailure {
            throw error
        } catch let error as BeginFailed {
            throw error
        } catch {
            throw PostgresFailure(error, place: place)
        }
    }

    // MARK: StorageEngine

    /// The event horizon (see ``PostgresTransaction/eventHorizon()``): it changes whenever
    /// anybody commits an event.
    func foreignChangeToken() async throws -> Int {
        let watch = StatementWatch(abandonment, answerBoundMs: answerBoundMs)
        do {
            let value = try await withTaskCancellationHandler {
                try await servers.withConnection { connection in
                    try await TransactionThread.run {
                        try PostgresTransaction(engine: self, connection: connection, writing: false, watch: watch)
                            .computeEventHorizon()
                    }
                }
            } onCancel: {
                watch.giveUp(afterMs: cancelledWaitMs)
            }
            return Int(truncatingIfNeeded: value)
        } catch {
            throw PostgresFailure(error, place: place)
        }
    }

    var pushesForeignChanges: Bool { wakeUps == .notifications }

    /// Listens on the store's channel on a connection of the pool kept for it: `changed` is
    /// called for every notification, and each time the listening starts (again), since what
    /// was sent while no connection listened is lost. A dropped connection is opened again
    /// after 0.1 s, then up to 1 s apart; polling covers the gap.
    func watchForeignChanges(clock: any StoreClock, _ changed: @escaping @Sendable () -> Void) async {
        guard wakeUps == .notifications else { return }
        // Whether a LISTEN was established since the last look.
        let listened = Locked(false)
        var delayMs: Int64 = 100
        while !Task.isCancelled {
            do {
                try await servers.withConnection { connection in
                    try await connection.listen(on: channel) { notifications in
                        changed()
                        listened.withLock { $0 = true }
                        for try await _ in notifications { changed() }
                    }
                }
            } catch {
                if Task.isCancelled { return }
                logger.debug(
                    "listening for other hosts' writes failed; polling meanwhile", metadata: ["error": "\(error)"])
            }
            do {
                try await clock.sleep(untilBootMilliseconds: clock.bootMilliseconds + delayMs)
            } catch {
                return
            }
            delayMs = listened.exchange(false) ? 100 : min(1000, delayMs * 2)
        }
    }

    func appliedMigrations() async throws -> [String] {
        try await transaction(writing: false) { tx in try PostgresMigrator.applied(tx) }
    }

    func integrityCheck(quick: Bool) async throws -> [String] {
        try await transaction(writing: false) { tx in try PostgresMigrator.integrityProblems(tx) }
    }

    /// The server reached (address, version, primary or standby, TLS), the lease's term, and how
    /// far this host's clock is from the database's.
    func details(clock: any StoreClock) async throws -> [EngineDetail] {
        let schema = schema
        let reached = servers.server
        return try await transaction(writing: false) { tx in
            let before = clock.systemMilliseconds
            let row = try tx.run(
                """
                SELECT current_setting('server_version'),
                    (SELECT term FROM \(tx.engine.prefix)countdown_lease WHERE id = 1),
                    floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint, current_schema(), pg_is_in_recovery(),
                    host(inet_server_addr()), inet_server_port(),
                    (SELECT CASE WHEN ssl THEN version || ' ' || cipher END FROM pg_stat_ssl
                        WHERE pid = pg_backend_pid())
                """
            ).rows.first?.makeRandomAccess()
            let after = clock.systemMilliseconds
            let version = try row?[0].decode(String.self) ?? "unknown"
            let term = try row?[1].decode(Int64?.self)
            let server = try row?[2].decode(Int64.self) ?? before
            let offset = (before + after) / 2 - server
            let standby = try row?[4].decode(Bool.self) ?? false
            let address = try row?[5].decode(String?.self)
            let port = try row?[6].decode(Int?.self)
            let tls = try row?[7].decode(String?.self)
            let seenAs = address.map { " (\($0):\(port ?? 0) as the server sees it)" } ?? " (Unix socket)"
            return [
                EngineDetail(name: "server", value: "PostgreSQL \(version), \(tx.engine.place)"),
                EngineDetail(
                    name: "connected to", value: "\(reached.map(\.description) ?? "the host's client")\(seenAs)"),
                EngineDetail(name: "role", value: standby ? "standby (read-only)" : "primary"),
                EngineDetail(name: "tls", value: tls ?? "off"),
                EngineDetail(name: "schema", value: try schema ?? row?[3].decode(String?.self) ?? "default"),
                EngineDetail(name: "lease term", value: term.map { "\($0)" } ?? "none"),
                EngineDetail(
                    name: "host clock",
                    value:
                        "\(offset >= 0 ? "+" : "")\(offset) ms from the database's "
                        + "(±\(max(1, (after - before) / 2)) ms); the store counts by the database's"
                ),
            ]
        }
    }

    /// Stops waiting for the statements under way and, for an owned client, ends it (its
    /// connections close).
    func close() throws {
        abandonWaits()
    }

    /// Every statement under way stops being waited for (its connection is closed, and it fails
    /// as abandoned); an owned client ends, so that no connection is waited for either.
    func abandonWaits() {
        abandonment.withLock { $0 = true }
        servers.abandon()
    }

    func clockReading(_ local: ClockReading) -> ClockReading {
        serverClock.reading(local: local, bootScope: bootScope)
    }
}
