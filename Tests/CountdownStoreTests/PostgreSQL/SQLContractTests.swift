import Foundation
import Logging
import PostgresNIO
import Testing

@testable import CountdownStoreCore
@testable import CountdownStorePostgres

/// The SQL contract on PostgreSQL (migration 0008): `countdown_start`, `countdown_cancel`,
/// `countdown_extend`, `countdown_claim` and `countdown_ack`, called in the caller's own
/// transaction, from clients nobody here wrote: Python's psycopg in processes of their own, and
/// `psql` running the article's SQL as it is printed. A Swift host (real clock, its ticker
/// running) shares each store, as it would in production.
///
/// Size: `COUNTDOWN_CONTRACT_SEQUENCES` random sequences through both paths (20 in CI), and 120
/// expiries consumed by two Python processes, one of them killed.
@Suite("SQL contract on PostgreSQL", .serialized, .timeLimit(.minutes(10)))
struct SQLContractTests {
    let hostLogger = Logger(label: "host")

    static let client = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Clients/sql_contract.py")
    static let article = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/CountdownStore/CountdownStore.docc/TransactionsAndExactlyOnce.md")

    static var psycopgInstalled: Bool {
        (try? HelperProcess.run(URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", "import psycopg"]))?.status
            == 0
    }

    /// A new schema, with a store opened on it by a Swift host on the real clock (the functions
    /// read the server's), and the shop's own tables beside the store's.
    static func shop() async throws -> (schema: String, store: CountdownStore, client: PostgresClient) {
        let server = try TestPostgres.shared()
        let schema = PostgresFixtures.newSchema()
        let store = try await CountdownStore(postgresURL: server.url + "?schema=\(schema)")
        let client = try PostgresFixtures.client()
        try await client.query(
            PostgresQuery(unsafeSQL: "CREATE TABLE \(schema).shop_orders (id text PRIMARY KEY, state text NOT NULL)"))
        try await client.query(
            PostgresQuery(
                unsafeSQL: "CREATE TABLE \(schema).shop_effects (key text NOT NULL, generation bigint, claimant text)"))
        return (schema, store, client)
    }

    static func python(_ arguments: [String], limit: Double = 60) async throws -> [String: Any] {
        let process = try HelperProcess(
            ["python3", client.path] + arguments, executable: URL(fileURLWithPath: "/usr/bin/env"))
        let lines = await process.finish(limit: limit)
        let last = try #require(lines.last, "no output from sql_contract.py: \(process.stderr.suffix(2000))")
        return try #require(try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any])
    }

    static func count(_ client: PostgresClient, _ sql: String) async throws -> Int {
        for try await value in try await client.query(PostgresQuery(unsafeSQL: sql)).decode(Int64.self) {
            return Int(value)
        }
        return 0
    }

    // MARK: - From Python

    @Test(
        "From Python (psycopg): an order and its deadline commit together, a rollback leaves neither, and bad input raises 22023 naming the value, changing nothing",
        .enabled(if: psycopgInstalled, "psycopg is not installed (pip install 'psycopg[binary]')"))
    func fromPython() async throws {
        let (schema, store, client) = try await Self.shop()
        let dsn = try TestPostgres.shared().url
        try await store.start("order-seed", duration: .seconds(600))

        let placed = try await Self.python(["place", dsn, schema, "o-1", "order-o-1", "15 minutes", "commit"])
        let item = try #require(placed["item"] as? [String: Any])
        #expect(item["state"] as? String == "running" && item["duration_ms"] as? Int == 900_000)
        #expect(item["group"] as? String == "payments" && item["payload"] as? String == "o-1")
        // What Swift reads of it is what SQL returned, field for field, as the tool prints it.
        let seen = try #require(try await store.countdown("order-o-1"))
        let encoded = try JSONSerialization.jsonObject(with: JSONEncoder().encode(seen)) as? [String: Any]
        for field in ["key", "group", "kind", "policy", "state", "duration_ms", "started_at", "deadline_at", "generation"]
        {
            #expect("\(encoded?[field] ?? "nil")" == "\(item[field] ?? "nil")", "\(field)")
        }
        #expect(try await Self.count(client, "SELECT count(*) FROM \(schema).shop_orders WHERE id = 'o-1'") == 1)

        let lastEvent = try await store.lastEventID()
        _ = try await Self.python(["place", dsn, schema, "o-2", "order-o-2", "15 minutes", "rollback"])
        #expect(try await store.countdown("order-o-2") == nil)
        #expect(try await Self.count(client, "SELECT count(*) FROM \(schema).shop_orders WHERE id = 'o-2'") == 0)
        #expect(try await store.lastEventID() == lastEvent, "a rollback leaves no event")

        let refused = try #require((try await Self.python(["refuse", dsn, schema]))["refusals"] as? [[String: Any]])
        #expect(refused.count == 13)
        for refusal in refused {
            let name = refusal["name"] as? String ?? "?"
            #expect(refusal["sqlstate"] as? String == "22023", "\(name): \(refusal)")
            #expect(refusal["unchanged"] as? Bool == true, "\(name) changed the store")
        }
        let messages = refused.compactMap { $0["message"] as? String }
        #expect(messages.contains { $0.contains("'sometimes'") }, "the bad policy is named")
        #expect(messages.contains { $0.contains("'-00:05:00'") }, "the bad duration is named")
        #expect(messages.contains { $0.contains("U+0009") }, "the control character is named")
        try await store.close()
    }

    @Test(
        "From Python (psycopg): two consumers in processes of their own apply each expiry's effect exactly once, in their acknowledgement's transaction, one of them killed midway",
        .enabled(if: psycopgInstalled, "psycopg is not installed (pip install 'psycopg[binary]')"))
    func pythonConsumersExactlyOnce() async throws {
        let (schema, store, client) = try await Self.shop()
        let dsn = try TestPostgres.shared().url
        let total = 120
        // Started through SQL, in batches, expiring over about three seconds; the Swift host's
        // ticker (woken by the functions' NOTIFY) records the expiries.
        let ticker = Task { try await CountdownTicker(store: store).run() }
        defer { ticker.cancel() }
        for batch in stride(from: 0, to: total, by: 20) {
            var sql = ""
            for index in batch..<(batch + 20) {
                sql += "SELECT \(schema).countdown_start('exp-\(index)', '\(200 + index * 25) milliseconds');"
            }
            try await client.withConnection { connection in
                _ = try await connection.query(PostgresQuery(unsafeSQL: "BEGIN"), logger: hostLogger)
                for statement in sql.split(separator: ";") {
                    _ = try await connection.query(PostgresQuery(unsafeSQL: String(statement)), logger: hostLogger)
                }
                _ = try await connection.query(PostgresQuery(unsafeSQL: "COMMIT"), logger: hostLogger)
            }
        }
        let victim = try HelperProcess(
            ["python3", Self.client.path, "consume", dsn, schema, "closer", "victim", "\(total)", "60"],
            executable: URL(fileURLWithPath: "/usr/bin/env"))
        let survivor = try HelperProcess(
            ["python3", Self.client.path, "consume", dsn, schema, "closer", "survivor", "\(total)", "60"],
            executable: URL(fileURLWithPath: "/usr/bin/env"))
        // Killed once it has applied something: what it held and had not committed goes back.
        let killBy = Date().addingTimeInterval(30)
        while Date() < killBy,
            try await Self.count(client, "SELECT count(*) FROM \(schema).shop_effects WHERE claimant = 'victim'") == 0
        {
            try await Task.sleep(for: .milliseconds(20))
        }
        victim.kill()
        _ = await victim.finish(limit: 10, status: nil)
        let survived = await survivor.finish(limit: 90)
        #expect(survived.last?.contains("applied") == true, "survivor: \(survivor.stderr.suffix(2000))")

        let applied = try await Self.count(client, "SELECT count(*) FROM \(schema).shop_effects")
        let distinct = try await Self.count(client, "SELECT count(DISTINCT key) FROM \(schema).shop_effects")
        #expect(applied == total && distinct == total, "\(applied) effects for \(distinct) of \(total) expiries")
        let expired = try await Self.count(
            client, "SELECT count(*) FROM \(schema).countdown_events WHERE kind = 'expired'")
        #expect(expired == total)
        try await store.close()
    }

    @Test("A host starts 20,000 countdowns in one transaction of its own, one lock held for their events; a savepoint rolled back takes its start, and the lock it took first, with it")
    func manyStartsInOneTransaction() async throws {
        let (schema, store, client) = try await Self.shop()
        let total = 20_000
        let locksHeld = try await client.withConnection { connection -> Int in
            func run(_ sql: String) async throws { _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: hostLogger) }
            try await run("BEGIN")
            try await run(
                "SELECT count(*) FROM (SELECT \(schema).countdown_start('bulk-' || i, interval '1 hour', 'bulk') "
                    + "FROM generate_series(1, \(total)) AS i) AS s")
            try await run("SAVEPOINT undone")
            try await run("SELECT \(schema).countdown_start('undone', interval '1 hour')")
            try await run("ROLLBACK TO SAVEPOINT undone")
            try await run("SELECT \(schema).countdown_start('after', interval '1 hour')")
            var held = 0
            for try await count in try await connection.query(
                PostgresQuery(
                    unsafeSQL: "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"),
                logger: hostLogger
            ).decode(Int64.self) { held = Int(count) }
            try await run("COMMIT")
            return held
        }
        // Before migration 0010 each call took a lock of its own, held to the commit: the
        // server's lock table ran out long before 20,000.
        #expect(locksHeld == 1, "\(locksHeld) advisory locks held by one writer")
        // A first lock taken inside a savepoint goes with it when it is rolled back, and so does
        // its note: the next call takes the lock again.
        let locksAfterRollback = try await client.withConnection { connection -> [Int] in
            func run(_ sql: String) async throws { _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: hostLogger) }
            try await run("BEGIN")
            try await run("SAVEPOINT first")
            try await run("SELECT \(schema).countdown_start('rolled-back', interval '1 hour')")
            try await run("ROLLBACK TO SAVEPOINT first")
            var held: [Int] = []
            let locks = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
            for try await count in try await connection.query(PostgresQuery(unsafeSQL: locks), logger: hostLogger)
                .decode(Int64.self) { held.append(Int(count)) }
            try await run("SELECT \(schema).countdown_start('kept', interval '1 hour')")
            for try await count in try await connection.query(PostgresQuery(unsafeSQL: locks), logger: hostLogger)
                .decode(Int64.self) { held.append(Int(count)) }
            try await run("COMMIT")
            return held
        }
        #expect(locksAfterRollback == [0, 1], "no lock left by the rolled-back savepoint, one taken again after it")
        #expect(try await store.countdown("rolled-back") == nil)
        #expect(try await store.countdown("kept")?.state == .running)
        #expect(try await store.countdown("bulk-\(total)")?.state == .running)
        #expect(try await store.countdown("undone") == nil)
        #expect(try await store.countdown("after")?.state == .running)
        let started = try await Self.count(
            client, "SELECT count(*) FROM \(schema).countdown_events WHERE kind = 'started' AND group_name = 'bulk'")
        #expect(started == total)
        // Every event is readable: none is held back behind a writer's lock left behind.
        #expect(try await store.lastEventID() == Int64(try await Self.count(client, "SELECT max(id) FROM \(schema).countdown_events")))
        try await store.close()
    }

    // MARK: - From psql

    /// The article's code blocks in `language`, in order.
    static func articleBlocks(_ language: String) throws -> [String] {
        let text = try String(contentsOf: article, encoding: .utf8)
        var blocks: [String] = []
        var current: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line.trimmingCharacters(in: .whitespaces) == "```" + language {
                current = ""
            } else if current != nil, line.trimmingCharacters(in: .whitespaces) == "```" {
                blocks.append(current!)
                current = nil
            } else if current != nil {
                current! += line + "\n"
            }
        }
        return blocks
    }

    @Test("From psql: the article's SQL runs as it is printed, in one session, and does what it says")
    func fromPsql() async throws {
        let server = try TestPostgres.shared()
        let (schema, store, client) = try await Self.shop()
        let blocks = try Self.articleBlocks("sql")
        #expect(blocks.count >= 2, "the article shows the SQL contract")
        let psql = server.binaries + "/psql"
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("\(schema).sql")
        try ("SET search_path TO \(schema);\n" + blocks.joined(separator: "\n")).write(
            to: script, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: script) }
        let run = try HelperProcess(
            ["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", server.url, "-f", script.path],
            executable: URL(fileURLWithPath: psql))
        let lines = await run.finish(limit: 60, status: nil)
        #expect(run.process.terminationStatus == 0, "psql: \(run.stderr.suffix(3000))")
        // The order the article places exists with its deadline; the one it rolls back does not.
        #expect(try await store.countdown("order-1042")?.state == .running, "\(lines)")
        #expect(try await Self.count(client, "SELECT count(*) FROM \(schema).shop_orders WHERE id = '1042'") == 1)
        #expect(try await store.countdown("order-1043") == nil)
        try await store.close()
    }

    @Test(
        "From Python: the article's psycopg example closes an expired order once, with its acknowledgement",
        .enabled(if: psycopgInstalled, "psycopg is not installed (pip install 'psycopg[binary]')"))
    func articlePython() async throws {
        let (schema, store, client) = try await Self.shop()
        let ticker = Task { try await CountdownTicker(store: store).run() }
        defer { ticker.cancel() }
        let example = try #require(try Self.articleBlocks("python").first, "the article shows the Python example")
        let driver = """
            import json, sys, time
            conn = psycopg.connect(sys.argv[1], autocommit=True)
            conn.execute("SELECT set_config('search_path', %s, false)", (sys.argv[2],))
            conn.execute("INSERT INTO shop_orders (id, state) VALUES ('1044', 'open')")
            conn.execute("SELECT countdown_start('order-1044', '300 milliseconds', 'payments', '1044')")
            closed, ended = 0, time.monotonic() + 30
            while closed == 0 and time.monotonic() < ended:
                closed += close_expired_orders(conn, "order-closer", "py-1")
                time.sleep(0.05)
            print(json.dumps({"closed": closed, "again": close_expired_orders(conn, "order-closer", "py-1")}))
            """
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("\(schema).py")
        try (example + "\n" + driver).write(to: script, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: script) }
        let process = try HelperProcess(
            ["python3", script.path, try TestPostgres.shared().url, schema],
            executable: URL(fileURLWithPath: "/usr/bin/env"))
        let lines = await process.finish(limit: 60)
        #expect(lines.last == #"{"closed": 1, "again": 0}"#, "\(lines) \(process.stderr.suffix(2000))")
        #expect(
            try await Self.count(client, "SELECT count(*) FROM \(schema).shop_orders WHERE id = '1044' AND state = 'closed'")
                == 1)
        try await store.close()
    }

    // MARK: - Both paths against the model

    /// An item as the model keeps it.
    struct ModelItem: Equatable {
        var state: CountdownState
        var durationMs: Int64
        var generation: Int64
        var group: String?
    }

    enum Path: String { case sql, swift }

    /// What a step came to: the item's state, duration and generation, or the refusal's code.
    enum Outcome: Equatable {
        case item(CountdownState, durationMs: Int64?, generation: Int64)
        case refused(String)
    }

    @Test("Random sequences of start, cancel and extend, each through SQL or Swift at random, with Swift's pause, resume and remove between, agree with the reference model")
    func bothPathsAgainstTheModel() async throws {
        let environment = ProcessInfo.processInfo.environment
        let sequences = environment["COUNTDOWN_CONTRACT_SEQUENCES"].flatMap(Int.init) ?? 20
        // A failure names its sequence: COUNTDOWN_CONTRACT_FIRST=N COUNTDOWN_CONTRACT_SEQUENCES=1 replays it.
        let first = environment["COUNTDOWN_CONTRACT_FIRST"].flatMap(Int.init) ?? 0
        let client = try PostgresFixtures.client()
        var steps = 0
        var refusals = 0
        var viaSQL = 0
        for sequence in first..<(first + sequences) {
            var random = SeededRandom(seed: UInt64(sequence) &* 0x9E37_79B9_7F4A_7C15 &+ 1)
            let (schema, store, _) = try await Self.shop()
            var model: [String: ModelItem] = [:]
            var retired: [String: Int64] = [:]
            var log: [String] = []
            for step in 0..<30 {
                let key = ["a", "b", "c"][random.next(3)]
                let path: Path = random.next(2) == 0 ? .sql : .swift
                let minutes = Int64(1 + random.next(90))
                let choice = random.next(10)
                var expected: Outcome
                var actual: Outcome
                var description: String
                switch choice {
                case 0...3:
                    description = "start \(key) \(minutes)m via \(path)"
                    if let item = model[key], item.state == .running || item.state == .paused {
                        expected = .refused("alreadyActive")
                    } else {
                        let generation = model[key].map { $0.generation + 1 } ?? (retired[key].map { $0 + 1 } ?? 1)
                        model[key] = ModelItem(state: .running, durationMs: minutes * 60_000, generation: generation)
                        expected = .item(.running, durationMs: minutes * 60_000, generation: generation)
                    }
                    actual =
                        path == .sql
                        ? try await Self.sql(client, "SELECT \(schema).countdown_start($1, $2::interval)::text", key, "\(minutes) minutes")
                        : await Self.swift { try await store.start(key, duration: .seconds(minutes * 60)) }
                case 4...5:
                    description = "cancel \(key) via \(path)"
                    expected = Self.change(&model, key) { item in
                        item.state = .cancelled
                        return nil
                    }
                    actual =
                        path == .sql
                        ? try await Self.sql(client, "SELECT \(schema).countdown_cancel($1)::text", key)
                        : await Self.swift { try await store.cancel(key) }
                case 6...7:
                    let years = random.next(4) == 0
                    let byMs: Int64 = years ? 99 * 365 * 86_400_000 : minutes * 60_000
                    description = "extend \(key) by \(years ? "99 years" : "\(minutes)m") via \(path)"
                    expected = Self.change(&model, key) { item in
                        if item.durationMs + byMs > 36_525 * 86_400_000 { return "invalidDuration" }
                        item.durationMs += byMs
                        item.generation += 1
                        return nil
                    }
                    actual =
                        path == .sql
                        ? try await Self.sql(
                            client, "SELECT \(schema).countdown_extend($1, $2::interval)::text", key,
                            years ? "\(99 * 365) days" : "\(minutes) minutes")
                        : await Self.swift { try await store.extend(key, by: .milliseconds(byMs)) }
                case 8:
                    let pausing = model[key]?.state == .running
                    description = "\(pausing ? "pause" : "resume") \(key) via swift"
                    expected = Self.change(&model, key) { item in
                        if item.state != (pausing ? .running : .paused) { return "wrongState" }
                        item.state = pausing ? .paused : .running
                        return nil
                    }
                    actual = await Self.swift { pausing ? try await store.pause(key) : try await store.resume(key) }
                default:
                    description = "remove \(key) via swift"
                    if let item = model.removeValue(forKey: key) {
                        retired[key] = item.generation
                        expected = .item(item.state, durationMs: item.durationMs, generation: item.generation)
                    } else {
                        expected = .refused("notFound")
                    }
                    actual = await Self.swift { try await store.remove(key) }
                }
                log.append(description)
                steps += 1
                if case .refused = expected { refusals += 1 }
                if path == .sql && choice <= 7 { viaSQL += 1 }
                #expect(
                    actual == expected,
                    "sequence \(sequence) step \(step): \(description): got \(actual), the model says \(expected); steps: \(log)")
                guard actual == expected else { break }
                // Both readers agree with the model after every step.
                for (key, item) in model {
                    let read = try await store.countdown(key)
                    #expect(
                        read?.state == item.state && read?.duration?.milliseconds == item.durationMs
                            && read?.generation == item.generation,
                        "sequence \(sequence) step \(step): \(key) reads \(String(describing: read)), the model says \(item)")
                }
            }
            try await store.close()
            try await client.query(PostgresQuery(unsafeSQL: "DROP SCHEMA \(schema) CASCADE"))
        }
        let report =
            "SQL contract: \(sequences) sequences, \(steps) steps (\(viaSQL) through SQL, \(refusals) refusals), "
            + "every outcome and every item as the model says"
        print(report)
        if let file = environment["COUNTDOWN_RELIABILITY_REPORT"] { try? (report + "\n").appendLine(to: file) }
    }

    /// Applies `change` to the active item under `key` in the model: the item after it, or the
    /// refusal (an unknown key, an item that has ended, or what `change` refuses).
    static func change(_ model: inout [String: ModelItem], _ key: String, _ change: (inout ModelItem) -> String?)
        -> Outcome
    {
        guard var item = model[key] else { return .refused("notFound") }
        guard item.state == .running || item.state == .paused else { return .refused("wrongState") }
        if let refusal = change(&item) { return .refused(refusal) }
        model[key] = item
        return .item(item.state, durationMs: item.durationMs, generation: item.generation)
    }

    /// A call through the SQL contract: the item it returned, or its refusal by SQLSTATE, named
    /// as the library names its codes.
    static func sql(_ client: PostgresClient, _ sql: String, _ arguments: String...) async throws -> Outcome {
        var bindings = PostgresBindings()
        for argument in arguments { bindings.append(argument) }
        do {
            let rows = try await client.query(PostgresQuery(unsafeSQL: sql, binds: bindings))
            for try await text in rows.decode(String.self) {
                let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
                let state = try #require(CountdownState(rawValue: object["state"] as? String ?? ""))
                return .item(
                    state, durationMs: (object["duration_ms"] as? Int).map(Int64.init),
                    generation: Int64(object["generation"] as? Int ?? 0))
            }
            return .refused("no row")
        } catch let error as PSQLError {
            let code =
                switch error.serverInfo?[.sqlState] {
                case "23505": "alreadyActive"
                case "P0002": "notFound"
                case "55000": "wrongState"
                case "22023": "invalidDuration"
                case let other: "SQLSTATE \(other ?? "none"): \(error.serverInfo?[.message] ?? "")"
                }
            return .refused(code)
        }
    }

    /// A call through the Swift API: the item it returned, or its refusal's code.
    static func swift(_ call: () async throws -> Countdown) async -> Outcome {
        do {
            let item = try await call()
            return .item(item.state, durationMs: item.duration?.milliseconds, generation: item.generation)
        } catch let error as CountdownError {
            return .refused("\(error.code)")
        } catch {
            return .refused("\(error)")
        }
    }
}

/// A small random generator with a seed, so that a sequence replays exactly (SplitMix64).
struct SeededRandom {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next(_ bound: Int) -> Int {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        mixed ^= mixed >> 31
        return Int(mixed % UInt64(bound))
    }
}
