@_exported import CountdownStoreCore
import Foundation
import Logging
import PostgresNIO

extension CountdownStore {
    /// Opens the store in the PostgreSQL database a connection string names, creating its
    /// tables (or bringing them up to date) on first use, on a connection pool of its own that
    /// ``close()`` ends.
    ///
    /// ```swift
    /// let store = try await CountdownStore(
    ///     postgresURL: "postgres://app@db1:5432,db2:5432/orders?target_session_attrs=read-write"
    ///         + "&sslmode=verify-full&sslrootcert=/etc/ssl/db-ca.pem")
    /// ```
    ///
    /// The string is read as libpq reads it, in URL form (`postgres://USER:PASSWORD@HOST:PORT/DB?…`)
    /// or `key=value` form (`host=db1,db2 dbname=orders sslmode=require`): several hosts tried
    /// in order with `target_session_attrs` (`any`, `read-write`, `primary`), `sslmode` with
    /// libpq's meanings (`disable`, `allow`, `prefer` — the default —, `require`, `verify-ca`,
    /// `verify-full`), `sslrootcert` (a file, or `system`), `sslcert` and `sslkey`,
    /// `connect_timeout`, `application_name` (default: this process's name), `options`,
    /// `load_balance_hosts`; a host starting with `/` is a Unix socket folder. What the string
    /// leaves out comes from the `PG*` environment variables and the password file
    /// (`PGPASSFILE`, `~/.pgpass`). Two parameters are this package's own: `schema=NAME` stands
    /// for `schema`, and `wakeups=poll` for `wakeUps: .pollOnly`. Any other parameter is refused
    /// by name.
    ///
    /// The store follows a failover: when its server goes away or refuses writes as read-only,
    /// it tries the servers again (see the article "Scaling out with PostgreSQL").
    ///
    /// - Parameters:
    ///   - url: the connection string.
    ///   - schema: a schema of the store's own (created when missing); `nil` puts the tables
    ///     where the connection's `search_path` does (usually `public`).
    ///   - wakeUps: how this host learns of other hosts' writes; `nil`: as the string says, else
    ///     ``PostgresWakeUps/notifications``. Through PgBouncer in transaction pooling, use
    ///     ``PostgresWakeUps/pollOnly``.
    ///   - configuration: the store's settings. ``Configuration/durability``: with
    ///     ``Durability/full`` every write transaction sets `synchronous_commit = on` for itself,
    ///     whatever the server's setting; with ``Durability/normal`` the server's setting decides
    ///     (PostgreSQL's default, `on`, already flushes every commit). A write waits for another
    ///     host's as the server's own `lock_timeout` allows. A host frozen or cut off inside a
    ///     transaction gives its locks up after half of ``Configuration/leaseDuration`` (at least
    ///     a second).
    /// - Throws: ``CountdownError/Code/invalidArgument`` for a string that does not parse or
    ///   names a parameter not supported (naming it, password hidden), or a TLS file that cannot
    ///   be read; ``CountdownError/Code/ioFailure`` when no server can be used, with each
    ///   server's reason (refused, TLS, authentication, read-only); ``CountdownError/Code/schemaTooNew``
    ///   for a database written by a newer CountdownStore.
    public convenience init(
        postgresURL url: String, schema: String? = nil, wakeUps: PostgresWakeUps? = nil,
        configuration: Configuration = Configuration()
    ) async throws(CountdownError) {
        try await self.init(
            postgresURL: url, schema: schema, wakeUps: wakeUps, configuration: configuration,
            defaultApplicationName: ProcessInfo.processInfo.processName)
    }

    /// As ``init(postgresURL:schema:wakeUps:configuration:)``, with the `application_name` the
    /// servers see when neither the string nor `PGAPPNAME` names one (the tool names its version).
    package convenience init(
        postgresURL url: String, schema: String? = nil, wakeUps: PostgresWakeUps? = nil,
        configuration: Configuration = Configuration(), defaultApplicationName: String
    ) async throws(CountdownError) {
        let target = try PostgresConnectionString(url, defaultApplicationName: defaultApplicationName)
        try target.checkTLSFiles()
        let schema = schema ?? target.schema
        let wakeUps = wakeUps ?? target.wakeUps ?? .notifications
        var extraParameters: [(String, String)] = []
        if wakeUps == .notifications {
            // A host frozen or cut off inside a transaction gives its locks up after half a
            // lease (at least a second), so that another host can take the lease within two
            // leases of its last heartbeat. PgBouncer refuses this startup parameter: behind it
            // (poll only), set it on the role instead.
            let idleMs = max(1000, configuration.leaseAtLeastASecond.milliseconds / 2)
            extraParameters.append(("idle_in_transaction_session_timeout", "\(idleMs)"))
        }
        let servers = ServerSelection(target: target, extraParameters: extraParameters, logger: configuration.logger)
        let place = quoted(target.redacted, limit: 200)
        // Each server tried gets the connect timeout; the whole opening, that and a margin.
        let openingBound = target.connectTimeout * (target.servers.count + 1)
        let engine: PostgresEngine
        do {
            engine = try await withThrowingTaskGroup(of: PostgresEngine?.self) { group in
                group.addTask {
                    try await Self.prepareEngine(
                        servers: servers, schema: schema, place: place, wakeUps: wakeUps,
                        configuration: configuration, databaseClock: true, beforeCommit: nil)
                }
                group.addTask {
                    try await Task.sleep(for: openingBound)
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let engine = first else {
                    throw CountdownError(
                        .ioFailure, "could not reach the database at \(place) within \(openingBound): no connection")
                }
                return engine
            }
        } catch {
            servers.abandon()
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
    ///   - configuration: the store's settings, as for ``init(postgresURL:schema:wakeUps:configuration:)``.
    public convenience init(
        client: PostgresClient, schema: String? = nil, wakeUps: PostgresWakeUps = .notifications,
        configuration: Configuration = Configuration()
    ) async throws(CountdownError) {
        try await self.init(
            client: client, schema: schema, place: "the host's PostgreSQL client", wakeUps: wakeUps,
            configuration: configuration, databaseClock: true)
    }

    /// Opens the store on `client`. With `databaseClock` off the configuration's clock stands in
    /// for the server's (tests on virtual time); with `migratingUpTo`, the schema is brought only
    /// as far as that migration (tests of upgrades).
    convenience init(
        client: PostgresClient, schema: String?, place: String, wakeUps: PostgresWakeUps,
        configuration: Configuration, databaseClock: Bool, beforeCommit: (@Sendable () -> Void)? = nil,
        migratingUpTo last: String? = nil
    ) async throws(CountdownError) {
        let engine: PostgresEngine
        do {
            engine = try await Self.prepareEngine(
                servers: ServerSelection(client: client, logger: configuration.logger), schema: schema, place: place,
                wakeUps: wakeUps,
                configuration: configuration, databaseClock: databaseClock, beforeCommit: beforeCommit, upTo: last)
        } catch {
            throw CountdownError(storage: error, path: nil)
        }
        self.init(engine: engine, path: nil, configuration: configuration)
    }

    /// The engine on `client`, its schema brought up to date and its clocks started.
    private static func prepareEngine(
        servers: ServerSelection, schema: String?, place: String, wakeUps: PostgresWakeUps,
        configuration: Configuration, databaseClock: Bool, beforeCommit: (@Sendable () -> Void)?,
        upTo last: String? = nil
    ) async throws -> PostgresEngine {
        if let schema, schema.isEmpty || schema.utf8.count > 63 || schema.contains("\0") {
            throw CountdownError(
                .invalidArgument, "invalid schema \(quoted(schema)): must be 1 to 63 bytes, without NUL")
        }
        let prefix = schema.map { PostgresMigrator.quotedIdentifier($0) + "." } ?? ""
        var engine = PostgresEngine(
            servers: servers, prefix: prefix, schema: schema,
            place: place, logger: configuration.logger,
            bootScope: "\(configuration.clock.bootIdentity ?? "boot"):\(UUID().uuidString.prefix(8).lowercased())",
            serverClock: ServerClockEstimate(),
            databaseClock: databaseClock, wakeUps: wakeUps,
            clockStepToleranceMs: max(1, configuration.clockEditTolerance.milliseconds),
            channel: notificationChannel(schema: schema), eventLockClass: eventLockClass(schema: schema),
            clock: configuration.clock, syncsEveryCommit: configuration.durability == .full, beforeCommit: beforeCommit,
            statements: PostgresStatements(
                prefix: prefix, insertColumns: PostgresTransaction.insertColumns,
                insertTypes: PostgresTransaction.insertTypes),
            abandonment: Locked(false),
            cancelledWaitMs: Int(configuration.leaseAtLeastASecond.milliseconds),
            answerBoundMs: nil)
        let first = ClockReading(configuration.clock)
        try await engine.transaction(writing: true) { tx in
            try PostgresMigrator.prepare(tx, firstReading: first, upTo: last)
        }
        engine.answerBoundMs = max(10_000, 4 * Int(configuration.leaseAtLeastASecond.milliseconds))
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
