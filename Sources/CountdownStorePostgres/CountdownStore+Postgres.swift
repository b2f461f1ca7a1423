@_exported import CountdownStoreCore
import Foundation
import Logging
import PostgresNIO

extension CountdownStore {
    /// Opens the store in the PostgreSQL database at `url`, creating its tables (or bringing
    /// them up to date) on first use, on a connection pool of its own that ``close()`` ends.
    ///
    /// ```swift
    /// let store = try await CountdownStore(postgresURL: "postgres://app@db.internal:5432/orders")
    /// ```
    ///
    /// The URL is `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`; `?host=/run/postgresql`
    /// reaches the server through the Unix socket in that folder instead, `?sslmode=disable`
    /// (or `prefer`, the default, or `require`) chooses TLS, `?schema=NAME` stands for `schema`,
    /// and `?wakeups=poll` for `wakeUps: .pollOnly`.
    ///
    /// - Parameters:
    ///   - url: the database's URL.
    ///   - schema: a schema of the store's own (created when missing); `nil` puts the tables
    ///     where the connection's `search_path` does (usually `public`).
    ///   - wakeUps: how this host learns of other hosts' writes; `nil`: as the URL says, else
    ///     ``PostgresWakeUps/notifications``. Through PgBouncer in transaction pooling, use
    ///     ``PostgresWakeUps/pollOnly``.
    ///   - configuration: the same settings as for SQLite, less two that are SQLite's alone:
    ///     ``Configuration/busyTimeout`` (a write here waits for another host's as the server's
    ///     own `lock_timeout` allows) and ``Configuration/durability`` (the server's
    ///     `synchronous_commit` decides). A host frozen inside a transaction gives its locks up
    ///     after ``Configuration/leaseDuration``.
    /// - Throws: ``CountdownError/Code/invalidArgument`` for a URL that does not parse (naming it,
    ///   password hidden); ``CountdownError/Code/ioFailure`` when the server cannot be reached;
    ///   ``CountdownError/Code/schemaTooNew`` for a database written by a newer CountdownStore.
    public convenience init(
        postgresURL url: String, schema: String? = nil, wakeUps: PostgresWakeUps? = nil,
        configuration: Configuration = Configuration()
    ) async throws(CountdownError) {
        let target = try PostgresURL(url)
        let schema = schema ?? target.schema
        let wakeUps = wakeUps ?? target.wakeUps ?? .notifications
        var clientConfiguration = target.clientConfiguration
        if wakeUps == .notifications {
            // A host frozen inside a transaction gives its locks up after a lease. PgBouncer
            // refuses this startup parameter: behind it (poll only), set it on the role instead.
            clientConfiguration.options.additionalStartupParameters.append(
                ("idle_in_transaction_session_timeout", "\(configuration.leaseAtLeastASecond.milliseconds)"))
        }
        let client = PostgresClient(configuration: clientConfiguration, backgroundLogger: configuration.logger)
        let runner = ClientRunner(client)
        let place = quoted(target.redacted, limit: 200)
        let connectTimeout = clientConfiguration.options.connectTimeout
        let engine: PostgresEngine
        do {
            // A server that does not answer fails the opening within the connect timeout, with its URL.
            engine = try await withThrowingTaskGroup(of: PostgresEngine?.self) { group in
                group.addTask {
                    try await Self.prepareEngine(
                        client: client, schema: schema, place: place, runner: runner, wakeUps: wakeUps,
                        configuration: configuration, databaseClock: true, beforeCommit: nil)
                }
                group.addTask {
                    try await Task.sleep(for: connectTimeout)
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let engine = first else {
                    throw CountdownError(
                        .ioFailure, "could not reach the database at \(place) within \(connectTimeout): no connection")
                }
                return engine
            }
        } catch {
            runner.stop()
            throw CountdownError(storage: error, path: nil)
        }
        self.init(engine: engine, path: nil, configuration: configuration)
    }

    /// Opens the store in the database the host's `client` reaches, creating its tables (or
    /// bringing them up to date) on first use. The host runs the client (`client.run()`) and
    /// ends it; ``close()`` leaves it running.
    ///
    /// - Parameters:
    ///   - client: the host's connection pool, running.
    ///   - schema: a schema of the store's own (created when missing); `nil` puts the tables
    ///     where the connections' `search_path` does.
    ///   - wakeUps: how this host learns of other hosts' writes. With
    ///     ``PostgresWakeUps/notifications`` a running ticker keeps one of the client's
    ///     connections listening.
    ///   - configuration: the same settings as for SQLite.
    public convenience init(
        client: PostgresClient, schema: String? = nil, wakeUps: PostgresWakeUps = .notifications,
        configuration: Configuration = Configuration()
    ) async throws(CountdownError) {
        try await self.init(
            client: client, schema: schema, place: "the host's PostgreSQL client", runner: nil, wakeUps: wakeUps,
            configuration: configuration, databaseClock: true)
    }

    /// Opens the store on `client`. With `databaseClock` off the configuration's clock stands in
    /// for the server's (tests on virtual time); with `migratingUpTo`, the schema is brought only
    /// as far as that migration (tests of upgrades).
    convenience init(
        client: PostgresClient, schema: String?, place: String, runner: ClientRunner?, wakeUps: PostgresWakeUps,
        configuration: Configuration, databaseClock: Bool, beforeCommit: (@Sendable () -> Void)? = nil,
        migratingUpTo last: String? = nil
    ) async throws(CountdownError) {
        let engine: PostgresEngine
        do {
            engine = try await Self.prepareEngine(
                client: client, schema: schema, place: place, runner: runner, wakeUps: wakeUps,
                configuration: configuration, databaseClock: databaseClock, beforeCommit: beforeCommit, upTo: last)
        } catch {
            throw CountdownError(storage: error, path: nil)
        }
        self.init(engine: engine, path: nil, configuration: configuration)
    }

    /// The engine on `client`, its schema brought up to date and its clocks started.
    private static func prepareEngine(
        client: PostgresClient, schema: String?, place: String, runner: ClientRunner?, wakeUps: PostgresWakeUps,
        configuration: Configuration, databaseClock: Bool, beforeCommit: (@Sendable () -> Void)?, upTo last: String? = nil
    ) async throws -> PostgresEngine {
        if let schema, schema.isEmpty || schema.utf8.count > 63 || schema.contains("\0") {
            throw CountdownError(
                .invalidArgument, "invalid schema \(quoted(schema)): must be 1 to 63 bytes, without NUL")
        }
        let prefix = schema.map { PostgresMigrator.quotedIdentifier($0) + "." } ?? ""
        let engine = PostgresEngine(
            client: client, prefix: prefix, schema: schema,
            place: place, logger: configuration.logger,
            bootScope: "\(configuration.clock.bootIdentity ?? "boot"):\(UUID().uuidString.prefix(8).lowercased())",
            serverClock: ServerClockEstimate(), runner: runner,
            databaseClock: databaseClock, wakeUps: wakeUps,
            clockStepToleranceMs: max(1, configuration.clockEditTolerance.milliseconds),
            channel: notificationChannel(schema: schema), eventLockClass: eventLockClass(schema: schema),
            clock: configuration.clock, beforeCommit: beforeCommit,
            statements: PostgresStatements(
                prefix: prefix, insertColumns: PostgresTransaction.insertColumns, insertTypes: PostgresTransaction.insertTypes),
            abandonment: EngineAbandonment(),
            cancelledWaitMs: Int(configuration.leaseAtLeastASecond.milliseconds))
        let first = ClockReading(configuration.clock)
        try await engine.transaction(writing: true) { tx in
            try PostgresMigrator.prepare(tx, firstReading: first, upTo: last)
        }
        return engine
    }
}

/// The NOTIFY channel of the store in `schema`: `countdown_` and the schema's name, or, for a
/// name too long for a channel (63 bytes), a hash of it.
func notificationChannel(schema: String?) -> String {
    guard let schema else { return "countdown" }
    if schema.utf8.count <= 50 { return "countdown_" + schema }
    return "countdown_" + String(stableHash(schema), radix: 16)
}

/// The first key of the advisory locks that the writers of events of the store in `schema`
/// hold (see ``PostgresTransaction/flushEvents()``).
func eventLockClass(schema: String?) -> Int32 {
    Int32(truncatingIfNeeded: stableHash("CountdownStore events:" + (schema ?? "")))
}

/// FNV-1a of `text`: stable across processes and machines.
func stableHash(_ text: String) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in text.utf8 {
        hash ^= UInt64(byte)
        hash = hash &* 0x100_0000_01b3
    }
    return hash
}
