import CountdownStore
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
struct PostgresEngine: StorageEngine {
    let client: PostgresClient
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
    /// The task running an owned client (`nil` for the host's client).
    let runner: ClientRunner?
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
    /// Called in every write transaction right before its COMMIT (tests hold a writer there).
    let beforeCommit: (@Sendable () -> Void)?
    /// The statements sent most, written for this store's schema.
    let statements: PostgresStatements
    /// Whether the store gave up on the operations under way (it closed without waiting for
    /// them): their statements stop being waited for.
    let abandonment: EngineAbandonment
    /// How long a statement is still waited for once the task that waits for it is cancelled:
    /// the store's stop bound (its lease duration, at least a second).
    let cancelledWaitMs: Int

    var knownMigrations: [String] { Migration.embedded.map(\.name) }
    var writersRunSideBySide: Bool { true }

    // MARK: Transactions

    func read<T: Sendable>(_ body: @escaping @Sendable (any RepositoryReading) throws -> T) async throws -> T {
        try await transaction(writing: false) { tx in try body(tx) }
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (any RepositoryWriting) throws -> T) async throws -> T {
        try await transaction(writing: true) { tx in try body(tx) }
    }

    /// A read transaction that reads events by ID: the event horizon is computed before its
    /// BEGIN, so that its one snapshot shows every event up to it (see
    /// ``PostgresTransaction/eventHorizon()``).
    func readEvents<T: Sendable>(_ body: @escaping @Sendable (any RepositoryReading) throws -> T) async throws -> T {
        try await transaction(writing: false, eventHorizonFirst: true) { tx in try body(tx) }
    }

    /// How many times a write the server chose as a deadlock's victim is run again.
    static let deadlockRetries = 5

    /// Runs `body` in one transaction on a leased connection, on a thread of the engine's own.
    ///
    /// Writers run side by side and lock the rows of the countdowns they change; two that lock
    /// the same rows in different orders (bulk operations over overlapping keys) deadlock, and
    /// the server rolls one back: that one runs again, up to ``deadlockRetries`` times.
    func transaction<T: Sendable>(
        writing: Bool, eventHorizonFirst: Bool = false, _ body: @escaping @Sendable (PostgresTransaction) throws -> T
    ) async throws -> T {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await attemptTransaction(writing: writing, eventHorizonFirst: eventHorizonFirst, body)
            } catch let error as PostgresFailure where writing && error.isDeadlock && attempt <= Self.deadlockRetries {
                logger.debug("a write was rolled back by a deadlock; running it again", metadata: ["attempt": "\(attempt)"])
            } catch let failed as BeginFailed {
                // The pool handed over a connection the server had already closed (a terminated
                // session, a restart): nothing ran, so once more on another.
                guard failed.failure.isTransient, attempt == 1, !(failed.failure.error is WaitAbandoned) else { throw failed.failure }
                logger.debug("a pooled connection was closed; beginning again on another", metadata: ["error": "\(failed.failure)"])
            }
        }
    }

    private func attemptTransaction<T: Sendable>(
        writing: Bool, eventHorizonFirst: Bool, _ body: @escaping @Sendable (PostgresTransaction) throws -> T
    ) async throws -> T {
        let watch = StatementWatch(abandonment)
        do {
            return try await withTaskCancellationHandler {
                try await client.withConnection { connection in
                    try await Blocking.run {
                        let tx = PostgresTransaction(engine: self, connection: connection, writing: writing, watch: watch)
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
                            writing ? "BEGIN ISOLATION LEVEL READ COMMITTED" : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
                            isBegin: true)
                        do {
                            let value = try body(tx)
                            if writing {
                                try tx.finish()
                                if let beforeCommit {
                                    try tx.takeUnanswered()
                                    beforeCommit()
                                }
                            }
                            try tx.execute("COMMIT")
                            return value
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
        } catch let error as CheckpointBehindBacklog {
            throw error  // the store records the backlog and tries again
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
        let watch = StatementWatch(abandonment)
        do {
            let value = try await withTaskCancellationHandler {
                try await client.withConnection { connection in
                    try await Blocking.run {
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

    func startUpkeep() throws -> (any EngineUpkeep)? { nil }

    var pushesForeignChanges: Bool { wakeUps == .notifications }

    /// Listens on the store's channel on a connection of the pool kept for it: `changed` is
    /// called for every notification, and each time the listening starts (again), since what
    /// was sent while no connection listened is lost. A dropped connection is opened again
    /// after 0.1 s, then up to 1 s apart; polling covers the gap.
    func watchForeignChanges(clock: any StoreClock, _ changed: @escaping @Sendable () -> Void) async {
        guard wakeUps == .notifications else { return }
        let listened = ListenedFlag()
        var delayMs: Int64 = 100
        while !Task.isCancelled {
            do {
                try await client.withConnection { connection in
                    try await connection.listen(on: channel) { notifications in
                        changed()
                        listened.set()
                        for try await _ in notifications { changed() }
                    }
                }
            } catch {
                if Task.isCancelled { return }
                logger.debug("listening for other hosts' writes failed; polling meanwhile", metadata: ["error": "\(error)"])
            }
            do {
                try await clock.sleep(untilBootMilliseconds: clock.bootMilliseconds + delayMs)
            } catch {
                return
            }
            delayMs = listened.take() ? 100 : min(1000, delayMs * 2)
        }
    }

    func appliedMigrations() async throws -> [String] {
        try await transaction(writing: false) { tx in try PostgresMigrator.applied(tx) }
    }

    func integrityCheck() async throws -> [String] {
        try await transaction(writing: false) { tx in try PostgresMigrator.integrityProblems(tx) }
    }

    func checkpointLog() async throws -> Bool { true }

    /// The server's version, the lease's term, and how far this host's clock is from the database's.
    func details(clock: any StoreClock) async throws -> [EngineDetail] {
        let schema = schema
        return try await transaction(writing: false) { tx in
            let before = clock.systemMilliseconds
            let row = try tx.run(
                """
                SELECT current_setting('server_version'), (SELECT term FROM \(tx.engine.prefix)countdown_lease WHERE id = 1),
                    floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint, current_schema()
                """
            ).rows.first?.makeRandomAccess()
            let after = clock.systemMilliseconds
            let version = try row?[0].decode(String.self) ?? "unknown"
            let term = try row?[1].decode(Int64?.self)
            let server = try row?[2].decode(Int64.self) ?? before
            let offset = (before + after) / 2 - server
            return [
                EngineDetail(name: "server", value: "PostgreSQL \(version), \(tx.engine.place)"),
                EngineDetail(name: "schema", value: try schema ?? row?[3].decode(String?.self) ?? "default"),
                EngineDetail(name: "lease term", value: term.map { "\($0)" } ?? "none"),
                EngineDetail(
                    name: "host clock",
                    value: "\(offset >= 0 ? "+" : "")\(offset) ms from the database's (±\(max(1, (after - before) / 2)) ms); the store counts by the database's"),
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
        abandonment.abandon()
        runner?.stop()
    }

    func clockReading(_ local: ClockReading) -> ClockReading {
        serverClock.reading(local: local, bootScope: bootScope)
    }
}

/// How hosts sharing a store on PostgreSQL learn of each other's writes.
public enum PostgresWakeUps: String, Sendable, Hashable, CaseIterable {
    /// LISTEN/NOTIFY, with polling as the fallback: a write on one host that moves the next
    /// deadline earlier (or records an expiry) wakes the tickers and event readers of the other
    /// hosts at once. The ticker keeps one connection of the pool listening. The default.
    case notifications = "notify"
    /// Polling alone, every 250 ms: for connections through PgBouncer in transaction pooling,
    /// where a LISTEN does not stay on one server connection. Writes still send notifications,
    /// for hosts that listen directly.
    case pollOnly = "poll"
}

/// The engine's estimate of the database server's clock between two readings of it: the last
/// reading plus the time this host's boot clock measured since.
/// Whether a LISTEN was established since the flag was last taken.
final class ListenedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false

    /// Raises the flag.
    func set() {
        lock.withLock { value = true }
    }

    /// Whether the flag was raised, lowering it.
    func take() -> Bool {
        lock.withLock {
            defer { value = false }
            return value
        }
    }
}

final class ServerClockEstimate: @unchecked Sendable {
    private let lock = NSLock()
    private var sample: (server: Int64, boot: Int64)?

    /// Records a reading of the server's clock (`server`, already corrected for a recorded skew)
    /// taken at `boot` on this host's boot clock.
    func record(server: Int64, boot: Int64) {
        lock.withLock { sample = (server, boot) }
    }

    /// The server's clock (corrected for the recorded skew) at `boot`, extrapolated on this
    /// host's boot clock from the last reading; `nil` before the first.
    func predicted(boot: Int64) -> Int64? {
        lock.withLock { sample.map { $0.server + (boot - $0.boot) } }
    }

    /// `local` with the estimated server clock in place of the system clock.
    func reading(local: ClockReading, bootScope: String) -> ClockReading {
        let estimate = lock.withLock { sample.map { $0.server + (local.boot - $0.boot) } }
        return ClockReading(system: estimate ?? local.system, boot: local.boot, bootID: bootScope)
    }
}

/// Runs an owned `PostgresClient` for as long as the store is open.
final class ClientRunner: Sendable {
    private let task: Task<Void, Never>

    init(_ client: PostgresClient) {
        task = Task { await client.run() }
    }

    func stop() {
        task.cancel()
    }
}

/// Synchronous work on threads that may block, bridged to and from Swift concurrency.
enum Blocking {
    /// Runs `body` on a thread of its own and returns its result: a blocked thread here never
    /// holds up a cooperative thread. Each call has a serial queue of its own, which Dispatch
    /// gives a thread even while others wait on the network (a shared concurrent queue runs
    /// about one block per core at a time, so transactions would queue behind blocked ones).
    /// Calls come from leased connections, so no more run at once than a pool has connections.
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue(label: "CountdownStorePostgres.transaction").async {
                continuation.resume(with: Result { try body() })
            }
        }
    }
}

/// A transaction's BEGIN failed: nothing of it ran.
struct BeginFailed: Error {
    let failure: PostgresFailure
}

/// The connection closed and a statement sent on it got no result: postgres-nio drops a
/// statement written to a connection that has just closed (a server restart, a terminated
/// session) without failing it.
struct ConnectionLost: Error, CustomStringConvertible {
    var description: String { "the connection closed before the statement's result came" }
}

/// A statement was no longer waited for: the store closed without waiting for it, or the task
/// that waited was cancelled and the database did not answer within the stop's bound.
struct WaitAbandoned: Error, CustomStringConvertible {
    let reason: String
    var description: String { "stopped waiting for the database's answer: \(reason)" }
}

/// Whether a store gave up on its engine's operations under way: set once, when it closes.
final class EngineAbandonment: @unchecked Sendable {
    // Safe: `abandoned` is only touched under `lock`.
    private let lock = NSLock()
    private var abandoned = false

    /// From now on, no statement of the engine is waited for.
    func abandon() {
        lock.withLock { abandoned = true }
    }

    /// Whether ``abandon()`` was called.
    var isAbandoned: Bool { lock.withLock { abandoned } }
}

/// When the statements of one transaction stop being waited for: once the engine is abandoned,
/// or a while after the task waiting for the transaction was cancelled.
final class StatementWatch: @unchecked Sendable {
    // Safe: `giveUpAt` is only touched under `lock`.
    private let lock = NSLock()
    private var giveUpAt: DispatchTime?
    private var graceMs = 0
    private let engine: EngineAbandonment

    init(_ engine: EngineAbandonment) {
        self.engine = engine
    }

    /// Gives up `milliseconds` from now (or earlier, if asked before).
    func giveUp(afterMs milliseconds: Int) {
        let at = DispatchTime.now() + .milliseconds(milliseconds)
        lock.withLock {
            if let earlier = giveUpAt, earlier <= at { return }
            giveUpAt = at
            graceMs = milliseconds
        }
    }

    /// Why the statement is no longer waited for, or `nil` while it still is.
    func reasonToGiveUp() -> String? {
        if engine.isAbandoned { return "the store closed without waiting any longer" }
        let (at, grace) = lock.withLock { (giveUpAt, graceMs) }
        guard let at, DispatchTime.now() >= at else { return nil }
        return "no answer within \(grace) ms after the task was cancelled"
    }
}

extension Blocking {
    /// How long a statement's own failure may follow the closing of its connection.
    static let closingGraceMs = 1000

    /// Waits on this thread for `future`, the result of a statement on `connection`; throws
    /// ``ConnectionLost`` if the connection has closed and the result still has not come a
    /// moment later, and ``WaitAbandoned`` (closing the connection) once `watch` gives up. (The
    /// connection and the watch are looked at every 0.1 s while the statement runs: a callback
    /// on its closing would stay registered for as long as the connection lives.)
    static func wait<T: Sendable>(
        for future: EventLoopFuture<T>, on connection: PostgresConnection, watch: StatementWatch
    ) throws -> T {
        let done = DispatchSemaphore(value: 0)
        let outcome = OutcomeBox<T>()
        future.whenComplete { result in
            outcome.set(result)
            done.signal()
        }
        var closedAt: DispatchTime?
        while true {
            if done.wait(timeout: .now() + .milliseconds(100)) == .success, let result = outcome.get() {
                return try result.get()
            }
            if let reason = watch.reasonToGiveUp() {
                // The session ends (the server rolls its transaction back once it answers again);
                // the pool opens another connection when it needs one.
                let closing: EventLoopFuture<Void> = connection.close()
                closing.whenComplete { _ in }
                throw WaitAbandoned(reason: reason)
            }
            guard connection.isClosed else { continue }
            // Closed: the statement's own failure (with the server's reason) normally follows at once.
            let now = DispatchTime.now()
            let since = closedAt ?? now
            closedAt = since
            if now >= since + .milliseconds(closingGraceMs) { throw ConnectionLost() }
        }
    }
}

/// A statement's result, set once from an event loop and read from the waiting thread.
final class OutcomeBox<T: Sendable>: @unchecked Sendable {
    // Safe: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: Result<T, any Error>?

    /// Keeps `result`.
    func set(_ result: Result<T, any Error>) {
        lock.withLock { value = result }
    }

    /// The result, once set.
    func get() -> Result<T, any Error>? {
        lock.withLock { value }
    }
}

/// A failure of PostgreSQL or of the connection to it, as the store reports it.
struct PostgresFailure: Error, StorageFailure, @unchecked Sendable {
    let error: any Error
    let place: String

    init(_ error: any Error, place: String) {
        self.error = error
        self.place = place
    }

    /// The SQLSTATE the server sent, if it sent one.
    var sqlState: String? {
        (error as? PSQLError)?.serverInfo?[.sqlState]
    }

    /// Whether the server rolled the transaction back to break a deadlock (or a serialization failure).
    var isDeadlock: Bool {
        sqlState == "40P01" || sqlState == "40001"
    }

    /// Whether the connection failed rather than the statement: the server closed it or is
    /// shutting down or starting up (SQLSTATE 57P01 admin_shutdown, 57P02 crash_shutdown,
    /// 57P03 cannot_connect_now, 57P05 idle_session_timeout, 25P03 idle-in-transaction
    /// timeout — a server whose clock jumps can fire it early —, class 08 connection exceptions),
    /// the connection broke or was closing, or the pool could not open one. The store's own
    /// pool being shut down (the store closed) is not transient.
    var isTransient: Bool {
        if error is ConnectionLost || error is WaitAbandoned { return true }
        guard let psql = error as? PSQLError else {
            // The pool's own failure that postgres-nio does not turn into a `PSQLError`: no
            // connection could be opened for a while (its circuit breaker tripped). Its type
            // lives in a module of postgres-nio's own, so it is told by its name.
            return String(describing: type(of: error)) == "ConnectionPoolError"
        }
        switch psql.code {
        case .serverClosedConnection, .clientClosedConnection, .connectionError, .uncleanShutdown:
            // (A query sent on a connection already closing after the server's error is
            // reported as closed by the client.)
            return true
        case .server:
            guard let sqlState else { return false }
            return ["57P01", "57P02", "57P03", "57P05", "25P03"].contains(sqlState) || sqlState.hasPrefix("08")
        default:
            return false
        }
    }

    func countdownError(place _: String) -> CountdownError {
        let where_ = " at \(place)"
        if let abandoned = error as? WaitAbandoned {
            return CountdownError(.ioFailure, "stopped waiting for the database\(where_): \(abandoned.reason)", underlying: self)
        }
        if isTransient, error is ConnectionLost || error is PSQLError {
            let psql = error as? PSQLError
            let reason = psql?.serverInfo?[.message].map { "\($0) (SQLSTATE \(sqlState ?? ""))" } ?? psql.map { "\($0.code)" } ?? "\(error)"
            return CountdownError(.ioFailure, "lost the connection to the database\(where_): \(reason)", underlying: self)
        }
        guard let psql = error as? PSQLError else {
            // The pool's own failures: no connection could be made.
            return CountdownError(.ioFailure, "could not reach the database\(where_): \(error)", underlying: self)
        }
        let message = psql.serverInfo?[.message] ?? "\(psql.code)"
        switch sqlState {
        case "53100"?:
            return CountdownError(.diskFull, "disk full writing the database\(where_): \(message)", underlying: self)
        case "55P03"?, "40001"?, "40P01"?, "57014"?:
            return CountdownError(.databaseBusy, "the database\(where_) stayed locked by another connection: \(message)", underlying: self)
        case .some:
            return CountdownError(.storageFailure, "storage failure\(where_): \(message) (SQLSTATE \(sqlState ?? ""))", underlying: self)
        case nil:
            return CountdownError(.ioFailure, "could not reach the database\(where_): \(message)", underlying: self)
        }
    }
}
