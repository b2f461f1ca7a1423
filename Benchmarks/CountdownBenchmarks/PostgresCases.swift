import CountdownStore
import CountdownStorePostgres
import Foundation
import PostgresNIO

/// How big each PostgreSQL benchmark is. Every statement is a round trip to the server, so the
/// write cases run fewer items than SQLite's; the large store has as many.
struct PostgresSizes {
    var single: Int
    var bulk: Int
    var concurrent: Int
    var stored: Int
    var lookups: Int
    var soonest: Int
    var expiring: Int
    var rounds: Int
    /// Countdowns started on one host and fired on another, with NOTIFY and polling alone.
    var crossHost: Int
    var crossHostPolling: Int
    /// Countdowns due at one instant in the mass-expiry case.
    var mass: Int

    static let full = PostgresSizes(
        single: 2_000, bulk: 20_000, concurrent: 4_000, stored: 1_000_000, lookups: 2_000, soonest: 500,
        expiring: 10_000, rounds: 5, crossHost: 200, crossHostPolling: 40, mass: 100_000)
    static let quick = PostgresSizes(
        single: 100, bulk: 500, concurrent: 320, stored: 10_000, lookups: 200, soonest: 20, expiring: 200,
        rounds: 1, crossHost: 10, crossHostPolling: 3, mass: 1_000)
}

/// The PostgreSQL benchmarks: the store on a `PostgresClient` beside the same statements sent
/// through another `PostgresClient` of the same configuration (and so the same pool size), in
/// schemas of their own on one server, dropped at the end.
struct PostgresBenchmarks {
    let sizes: PostgresSizes
    /// The store's connections.
    let ours: PostgresClient
    /// The raw side's connections.
    let raw: PostgresClient
    /// What every schema of this run begins with: no two runs on one server share a schema.
    let tag: String
    let log: @Sendable (String) -> Void
    let logger: Logger
    /// The server's URL, as given.
    let url: String

    /// The names `--only` selects the cases by.
    static let caseNames = [
        "postgres single", "postgres bulk", "postgres concurrent", "postgres next", "postgres soonest", "postgres expiring",
        "postgres cross-host", "postgres mass expiry", "postgres mass fairness", "postgres host transaction",
    ]

    /// What to do to run the PostgreSQL cases, printed when no server was given.
    static let howToRun = """
        PostgreSQL cases skipped: no server given. Run them with --postgres-url postgres://USER@HOST:PORT/DATABASE \
        or COUNTDOWN_POSTGRES_URL (each case works in schemas of its own, dropped afterwards)
        """

    static let hour: Int64 = 3_600_000

    /// The stores' settings: the defaults, logging errors only (the table reports what matters).
    static let storeConfiguration: CountdownStore.Configuration = {
        var logger = Logger(label: "CountdownStore")
        logger.logLevel = .error
        return CountdownStore.Configuration(logger: logger)
    }()

    /// Opens the store in `schema` on the store's client.
    func open(_ schema: String) async throws -> CountdownStore {
        try await CountdownStore(client: ours, schema: schema, configuration: Self.storeConfiguration)
    }

    /// Runs the wanted PostgreSQL cases against the server at `url` through `add`, or returns the
    /// line to print when none is given (`url` nil or empty) though some are wanted.
    static func measure(
        url: String?, quick: Bool, log: @escaping @Sendable (String) -> Void, wanted: (String) -> Bool,
        mass: @escaping () throws -> MassSettings, add: (String, () async throws -> [Figure]) async throws -> Void
    ) async throws -> String? {
        guard caseNames.contains(where: wanted) else { return nil }
        guard let url, !url.isEmpty else { return howToRun }
        let configuration = try PostgresRaw.configuration(url: url)
        let ours = PostgresClient(configuration: configuration)
        let raw = PostgresClient(configuration: configuration)
        let running = [Task { await ours.run() }, Task { await raw.run() }]
        defer { for task in running { task.cancel() } }
        let benchmarks = PostgresBenchmarks(
            sizes: quick ? .quick : .full, ours: ours, raw: raw,
            tag: "countdown_bench_\(ProcessInfo.processInfo.processIdentifier)_", log: log,
            logger: Logger(label: "CountdownBenchmarks"), url: url)
        let version = try await benchmarks.serverVersion(url: url)
        log("· PostgreSQL \(version) at \(Self.redacted(url)), pools of \(configuration.options.maximumConnections) connections")
        do {
            try await benchmarks.cases(wanted: wanted, mass: mass, add: add)
        } catch {
            try? await benchmarks.dropSchemas()
            // postgres-nio's errors describe themselves only when reflected.
            throw error is PSQLError ? BenchmarkError(String(reflecting: error)) : error
        }
        try await benchmarks.dropSchemas()
        return nil
    }

    /// Every case, in order; those on the large store share one built once.
    private func cases(
        wanted: (String) -> Bool, mass: @escaping () throws -> MassSettings, add: (String, () async throws -> [Figure]) async throws -> Void
    ) async throws {
        try await add("postgres single") { [try await singleStart()] }
        try await add("postgres bulk") { [try await bulkStart(count: sizes.bulk), try await bulkStart(count: sizes.bulk * 5)] }
        try await add("postgres host transaction") { try await hostTransactions() }
        for tasks in [1, 4, 16, 64] {
            try await add("postgres concurrent \(tasks)") { [try await concurrentStart(tasks: tasks)] }
        }
        try await add("postgres cross-host") {
            try await crossHost(wakeUps: .notifications, count: sizes.crossHost, p50: 10, p99: 50)
                + (try await crossHost(wakeUps: .pollOnly, count: sizes.crossHostPolling, p50: 1100, p99: 1100))
        }
        try await add("postgres mass expiry") { try await massExpiry(try mass()) }
        try await add("postgres mass fairness") { try await smallGroupsBesideBacklog() }
        guard ["postgres next", "postgres soonest", "postgres expiring"].contains(where: wanted) else { return }
        log("· building a PostgreSQL store of \(sizes.stored) items…")
        let large = try await largeStore()
        try await add("postgres next") { [try await nextDeadline(large)] }
        try await add("postgres soonest") { [try await soonest(large)] }
        try await add("postgres expiring") { [try await expiring(large)] }
    }

    /// `url` without its password, for messages.
    static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.password != nil else { return url }
        components.password = "***"
        return components.string ?? url
    }

    /// The server's version, or an error naming the URL when no connection is made within 15 s.
    private func serverVersion(url: String) async throws -> String {
        let client = self.raw
        return try await withThrowingTaskGroup(of: String?.self) { group in
            group.addTask {
                var version = "unknown"
                for try await row in try await client.query("SELECT current_setting('server_version')") {
                    version = try row.decode(String.self)
                }
                return version
            }
            group.addTask {
                try await Task.sleep(for: .seconds(15))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let version = first else {
                throw BenchmarkError("could not reach PostgreSQL at \(Self.redacted(url)) within 15 s")
            }
            return version
        }
    }

    // MARK: - Schemas

    /// The full name of this run's schema `name`.
    func schema(_ name: String) -> String { tag + name }

    /// `"schema".`, to put before table names.
    func prefix(_ schema: String) -> String { "\"\(schema)\"." }

    /// This run's schema `name`, new, with the store's tables in place (made by opening the store
    /// there once): the raw side writes into such schemas too, so both work on the same tables.
    func emptyStore(_ name: String) async throws -> String {
        let schema = schema(name)
        try await raw.query(PostgresRaw.query("DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE"))
        let store = try await open(schema)
        try await store.close()
        return schema
    }

    /// Drops every schema of this run.
    func dropSchemas() async throws {
        var schemas: [String] = []
        let rows = try await raw.query(
            PostgresRaw.query("SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)", [.text(tag)]))
        for try await row in rows { schemas.append(try row.decode(String.self)) }
        for schema in schemas {
            try await raw.query(PostgresRaw.query("DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE"))
        }
    }

    /// Opens `connections` connections of `client`'s pool at once, so that no measured round pays for
    /// connecting.
    func warm(_ client: PostgresClient, connections: Int) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<connections {
                group.addTask { _ = try await client.query("SELECT pg_sleep(0.02)") }
            }
            try await group.waitForAll()
        }
    }

    /// How many `clock_edited` events the store in `schema` has recorded: none, unless the
    /// store took its own waits for moves of the system clock.
    func clockEdits(_ schema: String) async throws -> Int {
        var count: Int64 = 0
        let rows = try await raw.query(
            PostgresRaw.query("SELECT count(*) FROM \(prefix(schema))countdown_events WHERE kind = 'clock_edited'"))
        for try await row in rows { count = try row.decode(Int64.self) }
        return Int(count)
    }

    // MARK: - Writes

    /// Starts one countdown at a time, each its own transaction.
    func singleStart() async throws -> Figure {
        let count = sizes.single
        var round = 0
        let (oursRate, rawRate) = try await alternating(rounds: sizes.rounds) {
            round += 1
            let store = try await open(try await emptyStore("single_ours_\(round)"))
            let seconds = try await timed {
                for index in 0..<count {
                    try await store.start("one-\(index)", duration: .milliseconds(Self.hour + Int64(index)), group: "g\(index % 16)")
                }
            }
            try await store.close()
            return Double(count) / seconds
        } raw: {
            let schema = try await emptyStore("single_raw_\(round)")
            let now = Date().millisecondsSince1970
            return Double(count)
                / (try await timed {
                    try await PostgresRaw.singleInserts(
                        raw, prefix: prefix(schema), keyPrefix: "one-", indices: 0..<count, groups: 16, nowMs: now,
                        logger: logger)
                })
        }
        return Figure(
            name: "PostgreSQL: single start, one transaction each", n: count, ours: oursRate, raw: rawRate, unit: "commits/s",
            target: .atLeastRatio(0.7))
    }

    /// A countdown started on one host and fired on another: the holder's ticker runs on one
    /// client, the writer starts on another (two pools, as two machines would have), one
    /// countdown of 50 ms at a time, each due before anything else, so the holder must learn of
    /// it to fire it on time. Lateness is the expiry's own `late` (when the holder recorded it,
    /// against its deadline); the writer waits for each expiry on its own event stream.
    func crossHost(wakeUps: PostgresWakeUps, count: Int, p50: Double, p99: Double) async throws -> [Figure] {
        let schema = try await emptyStore("cross_\(wakeUps.rawValue)")
        let holder = try await CountdownStore(client: ours, schema: schema, wakeUps: wakeUps, configuration: Self.storeConfiguration)
        let writer = try await CountdownStore(client: raw, schema: schema, wakeUps: wakeUps, configuration: Self.storeConfiguration)
        let ticker = CountdownTicker(store: holder)
        let running = Task { try await ticker.run() }
        defer { running.cancel() }
        let started = Date()
        while ticker.leaseStatus.map({ if case .held = $0 { false } else { true } }) ?? true {
            guard Date().timeIntervalSince(started) < 15 else { throw BenchmarkError("the ticker took no lease within 15 s") }
            try await Task.sleep(for: .milliseconds(10))
        }
        var expiries = try await writer.events(.expiries).makeAsyncIterator()
        var late: [Double] = []
        for index in 0..<count {
            try await writer.start("cross-\(index)", duration: .milliseconds(50))
            guard let expiry = try await expiries.next() else { throw BenchmarkError("the expiry stream ended") }
            late.append(Double(expiry.late?.milliseconds ?? 0))
        }
        running.cancel()
        _ = await running.result
        try await writer.close()
        try await holder.close()
        late.sort()
        let mode = wakeUps == .notifications ? "NOTIFY" : "polling alone"
        return [
            Figure(name: "PostgreSQL: started on one host, fired on another, \(mode), p50", n: count, ours: percentile(late, 0.5),
                   raw: nil, unit: "ms", target: .atMost(p50)),
            Figure(name: "PostgreSQL: started on one host, fired on another, \(mode), p99", n: count, ours: percentile(late, 0.99),
                   raw: nil, unit: "ms", target: .atMost(p99)),
        ]
    }

    /// Starts `count` countdowns in one call (one transaction), beside raw's set-based insert.
    func bulkStart(count: Int) async throws -> Figure {
        let requests = (0..<count).map { index in
            CountdownRequest.countdown("bulk-\(index)", duration: .milliseconds(Self.hour + Int64(index)), group: "g\(index % 16)")
        }
        var round = 0
        let (oursRate, rawRate) = try await alternating(rounds: sizes.rounds) {
            round += 1
            let store = try await open(try await emptyStore("bulk_ours_\(count)_\(round)"))
            let seconds = try await timed { try await store.start(requests) }
            try await store.close()
            return Double(count) / seconds
        } raw: {
            let schema = try await emptyStore("bulk_raw_\(count)_\(round)")
            let now = Date().millisecondsSince1970
            return Double(count)
                / (try await timed {
                    try await PostgresRaw.bulkInsert(
                        raw, prefix: prefix(schema), keyPrefix: "bulk-", count: count, groups: 16, nowMs: now, logger: logger)
                })
        }
        return Figure(
            name: "PostgreSQL: bulk start, one call", n: count, ours: oursRate, raw: rawRate, unit: "rows/s",
            target: .atLeastRatio(0.5))
    }

    /// `tasks` tasks start countdowns at once, one call each: on one store for ours (its group
    /// commit takes the calls that arrive together into one transaction), on the raw client's
    /// pool for raw (one transaction per call, side by side on the pool's connections, sharing
    /// the server's flushes).
    func concurrentStart(tasks: Int) async throws -> Figure {
        let count = sizes.concurrent
        let logger = self.logger
        var round = 0
        let (oursRate, rawRate) = try await alternating(rounds: sizes.rounds) {
            round += 1
            let schema = try await emptyStore("concurrent_ours_\(round)")
            let store = try await open(schema)
            try await warm(ours, connections: tasks)
            let seconds = try await timed {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for task in 0..<tasks {
                        group.addTask {
                            for index in stride(from: task, to: count, by: tasks) {
                                try await store.start(
                                    "many-\(index)", duration: .milliseconds(Self.hour + Int64(index)), group: "g\(index % 16)")
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            try await store.close()
            let edits = try await clockEdits(schema)
            if edits > 0 { log("  ours recorded \(edits) clock_edited events while its writers waited for one another") }
            return Double(count) / seconds
        } raw: {
            let tables = prefix(try await emptyStore("concurrent_raw_\(round)"))
            let client = self.raw
            try await warm(client, connections: tasks)
            let now = Date().millisecondsSince1970
            return Double(count)
                / (try await timed {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for task in 0..<tasks {
                            group.addTask {
                                try await PostgresRaw.singleInserts(
                                    client, prefix: tables, keyPrefix: "many-", indices: stride(from: task, to: count, by: tasks),
                                    groups: 16, nowMs: now, logger: logger)
                            }
                        }
                        try await group.waitForAll()
                    }
                })
        }
        return Figure(
            name: "PostgreSQL: \(tasks) tasks starting one call each, one store", n: count, ours: oursRate, raw: rawRate,
            unit: "starts/s", target: tasks == 64 ? .atLeastRatio(2) : tasks == 1 ? .atLeastRatio(0.7) : .unjudged)
    }

    // MARK: - The large store

    /// A store of `sizes.stored` items shaped like the SQLite large store: 85 % running wall
    /// countdowns, 10 % running active ones, 5 % paused; deadlines spread from 2 hours to 30 days
    /// ahead, in 50 groups, each with its start event. The rows are those the store writes for
    /// such starts and pauses at the store's current time, inserted by one `INSERT … SELECT`
    /// (starting a million one by one would take most of the run), then vacuumed and analysed.
    func largeStore() async throws -> String {
        let count = sizes.stored
        let schema = try await emptyStore("large")
        let p = prefix(schema)
        let store = try await open(schema)
        let now = try await store.now()
        try await store.close()
        let seconds = try await timed {
            try await raw.query(
                PostgresRaw.query(
                    """
                    INSERT INTO \(p)countdowns (key, group_name, kind, policy, state, duration_ms, generation,
                        start_offset_ms, gap_at_start_ms, started_at_ms, paused_ms, paused_at_ms, deadline_ms,
                        final_elapsed_ms, ended_at_ms, expired_at_ms, payload, payload_bytes, updated_at_ms)
                    SELECT 'item-' || lpad(i::text, 7, '0'), 'g' || (i % 50), 'countdown',
                        CASE WHEN i % 10 = 3 THEN 'active' ELSE 'wall' END,
                        CASE WHEN i % 20 = 7 THEN 'paused' ELSE 'running' END,
                        d, 1, $1, $2, $3, 0,
                        CASE WHEN i % 20 = 7 THEN $1 + $2 END,
                        CASE WHEN i % 10 = 3 THEN $1 + d ELSE $1 + $2 + d END,
                        NULL, NULL, NULL, NULL, NULL, $3
                    FROM (SELECT i, 2 * \(Self.hour)::bigint + (i::bigint * 7919) % (30 * 24 * \(Self.hour)::bigint) AS d
                          FROM generate_series(0, $4 - 1) AS i) AS s
                    ORDER BY i
                    """, [.int(now.active), .int(now.gap), .int(now.wall), .int(Int64(count))]))
            try await raw.query(
                PostgresRaw.query(
                    """
                    INSERT INTO \(p)countdown_events (kind, key, group_name, generation, at_ms, detail)
                    SELECT 'started', key, group_name, 1, $1, '{"duration_ms":' || duration_ms || '}'
                    FROM \(p)countdowns ORDER BY id
                    """, [.int(now.wall)]))
            try await raw.query(PostgresRaw.query("VACUUM ANALYZE \(p)countdowns"))
            try await raw.query(PostgresRaw.query("VACUUM ANALYZE \(p)countdown_events"))
        }
        log(String(format: "  built in %.1f s", seconds))
        return schema
    }

    /// The soonest running countdown, ours through `nextDeadline()`, raw by the same two index lookups.
    func nextDeadline(_ schema: String) async throws -> Figure {
        let store = try await open(schema)
        let now = try await store.now()
        let p = prefix(schema)
        let count = sizes.lookups
        let ourFirst = try await store.nextDeadline()
        let rawFirst = try await PostgresRaw.nextDeadline(
            raw, prefix: p, wallTimeline: now.active + now.gap, activeTimeline: now.active, logger: logger)
        precondition(ourFirst?.key != nil && ourFirst?.key == rawFirst?.key, "the two sides found different items")
        let (oursLatency, rawLatency) = try await alternating(rounds: sizes.rounds * 2 + 1) {
            try await timed {
                for _ in 0..<count { _ = try await store.nextDeadline() }
            } / Double(count)
        } raw: {
            try await timed {
                for _ in 0..<count {
                    _ = try await PostgresRaw.nextDeadline(
                        raw, prefix: p, wallTimeline: now.active + now.gap, activeTimeline: now.active, logger: logger)
                }
            } / Double(count)
        }
        try await store.close()
        return Figure(
            name: "PostgreSQL: next-deadline lookup", n: sizes.stored, ours: oursLatency * 1e6, raw: rawLatency * 1e6,
            unit: "µs", target: .atMostRatio(3))
    }

    /// The first page of 100 active items, ours through `active(limit:)`, raw by the same three
    /// index range scans, merged.
    func soonest(_ schema: String) async throws -> Figure {
        let store = try await open(schema)
        let now = try await store.now()
        let p = prefix(schema)
        let count = sizes.soonest
        let ourPage = try await store.active(limit: 100).items.map(\.key)
        let rawPage = try await PostgresRaw.soonest(
            raw, prefix: p, limit: 100, wallTimeline: now.active + now.gap, activeTimeline: now.active, logger: logger
        ).map(\.1.key)
        // Time moves between the two readings, so a running item and a paused one may swap places near the end.
        precondition(
            ourPage.count == 100 && Set(ourPage.prefix(90)).isSubset(of: rawPage), "the two sides listed different items")
        let (oursLatency, rawLatency) = try await alternating(rounds: sizes.rounds * 2 + 1) {
            try await timed {
                for _ in 0..<count {
                    let page = try await store.active(limit: 100)
                    precondition(page.items.count == 100)
                }
            } / Double(count)
        } raw: {
            try await timed {
                for _ in 0..<count {
                    let rows = try await PostgresRaw.soonest(
                        raw, prefix: p, limit: 100, wallTimeline: now.active + now.gap, activeTimeline: now.active,
                        logger: logger)
                    precondition(rows.count == 100)
                }
            } / Double(count)
        }
        try await store.close()
        return Figure(
            name: "PostgreSQL: 100 soonest active with remaining", n: sizes.stored, ours: oursLatency * 1e6,
            raw: rawLatency * 1e6, unit: "µs", target: .atMostRatio(1.5))
    }

    /// `sizes.expiring` countdowns come due in the large store; ours records their expiries with
    /// `expireDue()`, raw with one UPDATE and one INSERT per item. Each round starts its own due
    /// countdowns (through the store, untimed) beside the large store's items.
    func expiring(_ schema: String) async throws -> Figure {
        let count = sizes.expiring
        let store = try await open(schema)
        let p = prefix(schema)
        var oursRound = 0
        var rawRound = 0
        /// Starts `count` countdowns of 1 ms under `keyPrefix` and waits until they are due.
        func startDue(_ keyPrefix: String) async throws {
            try await store.start((0..<count).map { .countdown("\(keyPrefix)\($0)", duration: .milliseconds(1), group: "g\($0 % 50)") })
            try await Task.sleep(for: .milliseconds(20))
        }
        let (oursRate, rawRate) = try await alternating(rounds: max(1, sizes.rounds - 1)) {
            oursRound += 1
            try await startDue("due-ours-\(oursRound)-")
            var expired = 0
            let seconds = try await timed { expired = try await store.expireDue().count }
            precondition(expired == count, "expired \(expired) of \(count)")
            return Double(count) / seconds
        } raw: {
            rawRound += 1
            let keyPrefix = "due-raw-\(rawRound)-"
            try await startDue(keyPrefix)
            var timeline: Int64 = 0
            for try await row in try await raw.query(
                PostgresRaw.query("SELECT max(deadline_ms) FROM \(p)countdowns WHERE key LIKE $1", [.text(keyPrefix + "%")]))
            {
                timeline = try row.decode(Int64.self)
            }
            let now = Date().millisecondsSince1970
            var expired = 0
            let seconds = try await timed {
                expired = try await PostgresRaw.expireDue(raw, prefix: p, timeline: timeline, nowMs: now, limit: count, logger: logger)
            }
            precondition(expired == count, "raw expired \(expired) of \(count)")
            return Double(count) / seconds
        }
        try await store.close()
        return Figure(
            name: "PostgreSQL: expiring due items (state and events)", n: count, ours: oursRate, raw: rawRate, unit: "rows/s",
            target: .atLeastRatio(0.5))
    }

    // MARK: - Fairness

    /// `sizes.mass` due at one instant in one group, ten small groups beside it, then a hundred
    /// groups of one beside it (see `Fairness`), each in a schema of its own.
    func smallGroupsBesideBacklog() async throws -> [Figure] {
        var figures: [Figure] = []
        for (name, label, groups) in [
            ("fair_ten", "ten groups of five", Fairness.tenGroups),
            ("fair_hundred", "a hundred groups of one", Fairness.hundredGroups),
        ] {
            let store = try await open(try await emptyStore(name))
            let run = try await Fairness.run(
                store, label: label, count: sizes.mass, groups: groups, timeout: .seconds(900), log: log)
            try await store.close()
            figures += Fairness.figures("fairness, PostgreSQL:", run)
        }
        return figures
    }

    // MARK: - Mass expiry

    /// `sizes.mass` countdowns due at one instant, as on SQLite: started through the store on
    /// this process's client, expired by a real `countdown run --consumer sale` on the same
    /// server, a writer and a reader beside it; raw: the same due rows expired by one UPDATE and
    /// one INSERT each, in transactions of `settings.batch` rows, the same helpers beside.
    func massExpiry(_ settings: MassSettings) async throws -> [Figure] {
        let count = sizes.mass
        let ours = try await Mass.expiry(place: massPlace(try await emptyStore("mass_ours")), count: count, settings: settings, log: log)
        let rawRun = try await rawMassExpiry(count: count, settings: settings)
        Mass.describe(ours, rawRun, log: log)
        return Mass.figures("PostgreSQL: mass expiry", from: "the instant", ours: ours, raw: rawRun)
    }

    /// The store in `schema`, reached by the tool and the helpers through the server's URL with
    /// `?schema=`; every expiry is a round trip to the server, so `countdown run` is allowed 4 ms
    /// per countdown.
    func massPlace(_ schema: String) -> MassPlace {
        let client = raw
        let table = prefix(schema) + "countdown_lease"
        return MassPlace(
            db: Self.url(url, schema: schema), open: { try await open(schema) },
            leaseHolder: {
                var holder: String?
                for try await row in try await client.query(PostgresRaw.query("SELECT holder FROM \(table) WHERE id = 1")) {
                    holder = try row.decode(String?.self)
                }
                return holder
            }, perCountdown: .milliseconds(4))
    }

    /// `url` with `?schema=schema`.
    static func url(_ url: String, schema: String) -> String {
        guard var components = URLComponents(string: url) else { return url }
        components.queryItems = (components.queryItems ?? []).filter { $0.name != "schema" } + [URLQueryItem(name: "schema", value: schema)]
        return components.string ?? url
    }

    /// Raw: `count` running countdowns due 20 minutes ahead on the store's timeline (so the
    /// helpers' store never sees them due, and the writer's countdowns come after them), inserted by one `INSERT … SELECT` with their start
    /// events once the helpers are started, then expired `settings.batch` per transaction, the
    /// helpers beside.
    func rawMassExpiry(count: Int, settings: MassSettings) async throws -> TimedRun {
        let schema = try await emptyStore("mass_raw")
        let p = prefix(schema)
        let timeline = try await Mass.rawTimeline(massPlace(schema))
        let (client, logger, batch) = (raw, logger, settings.batch)
        return try await Mass.timedBeside(place: massPlace(schema), count: count, settings: settings, tag: "pg-raw-\(count)") {
            try await insertDue(schema, count: count, timeline: timeline)
        } work: {
            var first: ContinuousClock.Instant?
            var expired = 0
            while true {
                let done = try await PostgresRaw.expireDue(
                    client, prefix: p, timeline: timeline, nowMs: Date().millisecondsSince1970, limit: batch, logger: logger)
                if first == nil { first = .now }
                expired += done
                if done < batch { break }
            }
            guard expired == count else { throw BenchmarkError("raw expired \(expired) of \(count)") }
            return first
        }
    }

    /// Inserts `count` running countdowns `sale-0` … into the store in `schema`, which has no
    /// other, with their start events, all due at `timeline` on the wall timeline.
    func insertDue(_ schema: String, count: Int, timeline: Int64) async throws {
        let p = prefix(schema)
        let now = Date().millisecondsSince1970
        try await raw.query(
            PostgresRaw.query(
                """
                INSERT INTO \(p)countdowns (key, group_name, kind, policy, state, duration_ms, generation,
                    start_offset_ms, gap_at_start_ms, started_at_ms, paused_ms, paused_at_ms, deadline_ms,
                    final_elapsed_ms, ended_at_ms, expired_at_ms, payload, payload_bytes, updated_at_ms)
                SELECT $1 || i, 'sale', 'countdown', 'wall', 'running', $2, 1, 0, 0, $3, 0, NULL, $2,
                    NULL, NULL, NULL, NULL, NULL, $3
                FROM generate_series(0, $4 - 1) AS i ORDER BY i
                """, [.text(Mass.keyPrefix), .int(timeline), .int(now), .int(Int64(count))]))
        try await raw.query(
            PostgresRaw.query(
                """
                INSERT INTO \(p)countdown_events (kind, key, group_name, generation, at_ms, detail)
                SELECT 'started', key, group_name, 1, $1, '{"duration_ms":' || duration_ms || '}'
                FROM \(p)countdowns ORDER BY id
                """, [.int(now)]))
        try await raw.query(PostgresRaw.query("VACUUM ANALYZE \(p)countdowns"))
    }
}
