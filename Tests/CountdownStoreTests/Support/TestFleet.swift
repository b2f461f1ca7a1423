import CountdownStorePostgres
import Foundation
import Logging
import PostgresNIO
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

/// libfaketime's preload library, which moves the wall clock of the process it is loaded into.
let libfaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

/// Whether the fleet suites can run here: the built tool, libfaketime and the PostgreSQL server
/// binaries (each scenario starts a server of its own).
let fleetCanRun: Bool =
    FileManager.default.isExecutableFile(atPath: countdownBinary.path)
    && FileManager.default.isExecutableFile(atPath: faketimeBinary)
    && FileManager.default.fileExists(atPath: libfaketime)
    && TestPostgres.serverBinariesAvailable

/// The consumer name every host of a fleet runs with.
let fleetConsumer = "mailer"

/// Polls (real time) until `condition` holds, failing the test after `limit` seconds with
/// `what`. Before each look, `alive` may fail the wait early (a host that died).
func fleetEventually(
    _ what: String, limit: Double = 30, alive: () -> Bool = { true }, _ condition: () async throws -> Bool
) async throws {
    let deadline = Date().addingTimeInterval(limit)
    while Date() < deadline {
        guard alive() else { throw FleetFailure("a host died while waiting until \(what)") }
        if (try? await condition()) == true { return }
        try await Task.sleep(for: .milliseconds(50))
    }
    Issue.record("timed out after \(Int(limit)) s waiting until \(what)")
    throw FleetFailure("timed out waiting until \(what)")
}

/// A failure that ends a fleet scenario (already recorded as an issue where it has details).
struct FleetFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs blocking work (waiting for a process) on a thread of its own, off Swift's cooperative pool.
func onThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: work()) }
    }
}

// MARK: - Rows

/// A lease row.
struct FleetLease: Decodable, Sendable, Equatable {
    let holder: String?
    let acquired_at_ms: Int64?
    let expires_at_ms: Int64
    let term: Int64

    /// The pid in the holder's name (`host:pid:id`).
    var pid: Int32? { holder.flatMap { Int32($0.split(separator: ":").dropLast().last ?? "") } }
}

/// An `expired` row of `countdown_events`.
struct FleetExpiry: Decodable, Sendable {
    let id: Int64
    let key: String
    let generation: Int64
    let deadline_at_ms: Int64
    let fired_at_ms: Int64
    let late_ms: Int64
}

/// An item as `countdowns` keeps it.
struct FleetItem: Decodable, Sendable {
    let key: String
    let state: String
    let generation: Int64
    let policy: String
    let started_at_ms: Int64
    let start_offset_ms: Int64
    let gap_at_start_ms: Int64
    let duration_ms: Int64?
    let paused_ms: Int64
}

/// One checkpoint as the clock audit saw it saved.
struct FleetClockAudit: Decodable, Sendable {
    let id: Int64
    let server_addr: String?
    /// W − (A + G) at the checkpoint: the mapping between W and the wall timeline.
    let mapping_ms: Int64
    /// How far the wall floor is above W at the checkpoint (W slews while it is).
    let floor_excess_ms: Int64
    let heartbeat_at_ms: Int64
    let boot_id: String?
    let clock_skew_ms: Int64
    let server_ms: Int64
}

/// Any event's key, generation and position.
struct FleetEventStamp: Decodable, Sendable {
    let id: Int64
    let kind: String
    let key: String?
    let generation: Int64?
}

/// One row of the audit the suites add to a store's schema: who wrote an event or the lease.
struct FleetAudit: Decodable, Sendable {
    let id: Int64
    /// `event` or `lease`.
    let tbl: String
    /// The server address the writing connection came in through (it names the host).
    let server_addr: String?
    let event_kind: String?
    /// The lease as the writing transaction saw it (for a lease update: after the update).
    let lease_holder: String?
    let lease_term: Int64?
    let old_holder: String?
    let old_term: Int64?
    let old_expires_at_ms: Int64?
    let new_acquired_at_ms: Int64?
    /// The writing connection's `application_name` (hosts behind one address are told apart by it).
    let app: String?
}

/// One line a host printed for an expiry.
struct PrintedExpiry: Sendable, Hashable {
    let key: String
    let generation: Int64
    let lateMs: Int64
}

/// The key and generation of an expiry.
struct ExpiryID: Hashable, Sendable, CustomStringConvertible {
    let key: String
    let generation: Int64
    var description: String { "\(key)#\(generation)" }
}

// MARK: - The database, as the test reads it

/// The test's own view of one store's schema on a fleet's server, through a client of its own.
final class FleetDatabase: Sendable {
    let server: TestPostgres
    let schema: String
    private let client: PostgresClient
    private let runner: Task<Void, Never>

    init(server: TestPostgres, schema: String) {
        self.server = server
        self.schema = schema
        var configuration = server.configuration()
        configuration.options.maximumConnections = 4
        client = PostgresClient(configuration: configuration, backgroundLogger: Logger(label: "fleet-tests"))
        let client = client
        runner = Task { await client.run() }
    }

    /// `table` in the store's schema.
    func table(_ name: String) -> String { "\"\(schema)\".\(name)" }

    /// The URL hosts and writers open the store with: through `address` (a loopback address
    /// the server listens on; it names the connection's host in the audit), or through `port`.
    func url(address: String? = nil, port: Int? = nil, extra: String = "") -> String {
        "postgres://\(server.username)@\(address ?? server.host):\(port ?? server.port)/\(server.database)?sslmode=disable&schema=\(schema)\(extra)"
    }

    /// Runs `sql` and decodes each row (as `row_to_json`) into `T`.
    func fetch<T: Decodable & Sendable>(_ type: T.Type, _ sql: String) async throws -> [T] {
        let rows = try await client.query(PostgresQuery(unsafeSQL: "SELECT row_to_json(r)::text FROM (\(sql)) AS r"))
        var values: [T] = []
        let decoder = JSONDecoder()
        for try await text in rows.decode(String.self) { values.append(try decoder.decode(T.self, from: Data(text.utf8))) }
        return values
    }

    /// Runs `sql` and returns the first column of its first row as an integer.
    func integer(_ sql: String) async throws -> Int64? {
        let rows = try await client.query(PostgresQuery(unsafeSQL: sql))
        for try await value in rows.decode(Int64?.self) { return value }
        return nil
    }

    /// Runs statements whose results do not matter.
    func execute(_ sql: String) async throws {
        let rows = try await client.query(PostgresQuery(unsafeSQL: sql))
        for try await _ in rows {}
    }

    /// The lease row.
    func lease() async throws -> FleetLease {
        guard let lease = try await fetch(FleetLease.self, "SELECT holder, acquired_at_ms, expires_at_ms, term FROM \(table("countdown_lease")) WHERE id = 1").first
        else { throw FleetFailure("no lease row") }
        return lease
    }

    /// Every expiry recorded, in order.
    func expiries() async throws -> [FleetExpiry] {
        try await fetch(
            FleetExpiry.self,
            "SELECT id, key, generation, deadline_at_ms, fired_at_ms, late_ms FROM \(table("countdown_events")) WHERE kind = 'expired' ORDER BY id")
    }

    /// The checkpoints saved since the audit began.
    func clockAudit() async throws -> [FleetClockAudit] {
        try await fetch(
            FleetClockAudit.self,
            "SELECT id, server_addr, mapping_ms, floor_excess_ms, heartbeat_at_ms, boot_id, clock_skew_ms, server_ms FROM \(table("fleet_clock_audit")) ORDER BY id")
    }

    /// Every item.
    func items() async throws -> [FleetItem] {
        try await fetch(
            FleetItem.self,
            "SELECT key, state, generation, policy, started_at_ms, start_offset_ms, gap_at_start_ms, duration_ms, paused_ms FROM \(table("countdowns")) ORDER BY key")
    }

    /// How many events of `kind` there are.
    func count(kind: String) async throws -> Int64 {
        try await integer("SELECT count(*) FROM \(table("countdown_events")) WHERE kind = '\(kind)'") ?? 0
    }

    /// Adds the audit: a table and triggers recording, for every event appended and every update
    /// of the lease, the server address of the connection that wrote it and the lease as its
    /// transaction saw it. (The test's own instrumentation; the store does not know of it.)
    func installAudit() async throws {
        let audit = table("fleet_audit")
        let lease = table("countdown_lease")
        try await execute(
            """
            CREATE TABLE \(audit) (
                id bigserial PRIMARY KEY, tbl text NOT NULL, server_addr text, event_kind text,
                lease_holder text, lease_term bigint, old_holder text, old_term bigint,
                old_expires_at_ms bigint, new_acquired_at_ms bigint, app text DEFAULT current_setting('application_name'))
            """)
        try await execute(
            """
            CREATE TABLE \(table("fleet_clock_audit")) (
                id bigserial PRIMARY KEY, server_addr text, mapping_ms bigint NOT NULL, floor_excess_ms bigint NOT NULL,
                heartbeat_at_ms bigint NOT NULL, boot_id text, clock_skew_ms bigint NOT NULL, server_ms bigint NOT NULL)
            """)
        try await execute(
            """
            CREATE FUNCTION \(table("fleet_audit_clock"))() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO \(table("fleet_clock_audit")) (server_addr, mapping_ms, floor_excess_ms, heartbeat_at_ms, boot_id, clock_skew_ms, server_ms)
                VALUES (host(inet_server_addr()), NEW.heartbeat_at_ms - NEW.active_ms - NEW.gap_ms, NEW.wall_floor_ms - NEW.heartbeat_at_ms,
                        NEW.heartbeat_at_ms, NEW.boot_id, NEW.clock_skew_ms, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
                RETURN NEW;
            END $$
            """)
        try await execute(
            "CREATE TRIGGER fleet_audit_clock AFTER UPDATE ON \(table("countdown_clock")) FOR EACH ROW EXECUTE FUNCTION \(table("fleet_audit_clock"))()")
        try await execute(
            """
            CREATE FUNCTION \(table("fleet_audit_event"))() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO \(audit) (tbl, server_addr, event_kind, lease_holder, lease_term)
                SELECT 'event', host(inet_server_addr()), NEW.kind, l.holder, l.term FROM \(lease) AS l WHERE l.id = 1;
                RETURN NEW;
            END $$
            """)
        try await execute(
            """
            CREATE FUNCTION \(table("fleet_audit_lease"))() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO \(audit) (tbl, server_addr, lease_holder, lease_term, old_holder, old_term, old_expires_at_ms, new_acquired_at_ms)
                VALUES ('lease', host(inet_server_addr()), NEW.holder, NEW.term, OLD.holder, OLD.term, OLD.expires_at_ms, NEW.acquired_at_ms);
                RETURN NEW;
            END $$
            """)
        try await execute(
            "CREATE TRIGGER fleet_audit_event AFTER INSERT ON \(table("countdown_events")) FOR EACH ROW EXECUTE FUNCTION \(table("fleet_audit_event"))()")
        try await execute(
            "CREATE TRIGGER fleet_audit_lease AFTER UPDATE ON \(lease) FOR EACH ROW EXECUTE FUNCTION \(table("fleet_audit_lease"))()")
    }

    /// The audit's rows, in order.
    func audit() async throws -> [FleetAudit] {
        try await fetch(
            FleetAudit.self,
            """
            SELECT id, tbl, server_addr, event_kind, lease_holder, lease_term, old_holder, old_term, old_expires_at_ms, new_acquired_at_ms, app
            FROM \(table("fleet_audit")) ORDER BY id
            """)
    }

    /// The ids of the audit's rows committed so far. Rows are numbered when written, not when
    /// committed: a row of a transaction still open can commit later below the highest id seen,
    /// so what came after is told by this set, not by a last id.
    func auditIDs() async throws -> Set<Int64> {
        Set(try await audit().map(\.id))
    }

    /// The audit's rows committed since `earlier` was read (see ``auditIDs()``), in order.
    func audit(since earlier: Set<Int64>) async throws -> [FleetAudit] {
        try await audit().filter { !earlier.contains($0.id) }
    }

    /// Terminates every backend whose client port is in `ports`; how many.
    func terminate(clientPorts ports: [Int]) async throws -> Int64 {
        guard !ports.isEmpty else { return 0 }
        return try await integer(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE client_port IN (\(ports.map(String.init).joined(separator: ",")))) AS t"
        ) ?? 0
    }

    func close() {
        runner.cancel()
    }
}

/// The client ports of the established TCP connections that came in to `address`:`port`
/// (the server side of each, from `/proc/net/tcp`): a host's connections, when each host
/// reaches the server through a loopback address of its own.
func clientPorts(toAddress address: String, port: Int) -> [Int] {
    let octets = address.split(separator: ".").compactMap { UInt8($0) }
    guard octets.count == 4 else { return [] }
    // /proc/net/tcp shows an IPv4 address as its 32 bits in host (little-endian) order, in hex.
    let hex = octets.reversed().map { String(format: "%02X", $0) }.joined()
    let local = "\(hex):\(String(format: "%04X", port))"
    // Read to the end: Foundation's `String(contentsOfFile:)` stops after the first page of a /proc file.
    let table = String(decoding: FileHandle(forReadingAtPath: "/proc/net/tcp")?.readDataToEndOfFile() ?? Data(), as: UTF8.self)
    return table.split(separator: "\n").dropFirst().compactMap { line in
        let fields = line.split(separator: " ")
        guard fields.count > 3, fields[1] == local, fields[3] == "01" else { return nil }
        return fields[2].split(separator: ":").last.flatMap { Int($0, radix: 16) }
    }
}

// MARK: - Hosts

/// A `countdown run --consumer mailer` process of a fleet. Its stdout goes to a file, so that the
/// test reads what it printed while it runs; its stderr is kept for reports.
///
/// A host rides out a lost connection to the database (it tries again) and exits with status
/// 74 on any other storage failure; any end the test did not cause fails the test with its stderr.
final class FleetHost: Sendable {
    let name: String
    let outputPath: String
    /// The loopback address it reaches the server through (`nil`: the server's own).
    let address: String?
    /// The running process.
    let helper: HelperProcess
    private let ended = Locked<Ending?>(nil)

    /// How the test ended it.
    enum Ending: Sendable { case stopped, killed }

    /// Starts a host on `url`, its wall clock moved by `clockOffset` (libfaketime's
    /// `FAKETIME`, e.g. `-1h`; the boot clock stays real).
    init(name: String, url: String, folder: TemporaryFolder, address: String? = nil, clockOffset: String? = nil) throws {
        self.name = name
        self.address = address
        outputPath = folder.path("\(name).out")
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        var environment: [String: String] = [:]
        if let clockOffset {
            environment["LD_PRELOAD"] = libfaketime
            environment["FAKETIME"] = clockOffset
            environment["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
        }
        // A short claim timeout: what a killed host had claimed reaches another host within the run.
        // `sh` sends stdout to the file and becomes the tool (same pid).
        helper = try HelperProcess(
            ["--db", url, "run", "--consumer", fleetConsumer, "--claim-timeout", "3s"], executable: countdownBinary,
            shell: "exec >>'\(outputPath)'; exec", environment: environment)
    }

    var pid: Int32 { helper.process.processIdentifier }

    /// Whether it was killed with SIGKILL by the test.
    var wasKilled: Bool { ended.withLock { $0 } == .killed }

    /// How many times the test froze it with SIGSTOP.
    var stops: Int { stopCount.withLock { $0 } }
    private let stopCount = Locked(0)

    /// Whether it is running or was ended by the test. A host that ended otherwise fails the
    /// test with its stderr.
    func check() -> Bool {
        if helper.process.isRunning || ended.withLock({ $0 }) != nil { return true }
        // The host has ended: its output ends at once, so this wait is short.
        _ = helper.finishNow(limit: 5, status: nil)
        let status = helper.process.terminationStatus
        Issue.record("host \(name) (pid \(helper.process.processIdentifier)) ended by itself (status \(status)); stderr: \(helper.stderr.suffix(3000))")
        ended.withLock { $0 = .stopped }
        return false
    }

    /// Sends `signal` to the host (SIGSTOP, SIGCONT; SIGKILL kills it for good).
    func signal(_ signal: Int32) {
        if signal == SIGKILL { ended.withLock { $0 = .killed } }
        if signal == SIGSTOP { stopCount.withLock { $0 += 1 } }
        helper.kill(signal)
    }

    /// Kills it with SIGKILL and waits for it to end.
    func kill() async {
        signal(SIGKILL)
        let helper = helper
        _ = await helper.finish(limit: 15, status: nil)
    }

    /// Stops it gracefully (SIGCONT first, should it be stopped) and waits for it to end; it
    /// should exit 0. Anything still running after the wait is killed with its process group.
    func stop() async {
        let before = ended.withLock { value -> Ending? in
            let before = value
            if value == nil { value = .stopped }
            return before
        }
        guard before == nil else { return }
        let helper = helper
        helper.kill(SIGCONT)
        helper.kill(SIGTERM)
        _ = await helper.finish(limit: 20, status: 0)
    }

    /// Asks it to stop (SIGTERM) and waits at most `limit` seconds for it to end, whatever its
    /// exit status (a host cut off from the database cannot write its final heartbeat); returns
    /// its status and how long it took, or `nil` if it had to be killed.
    func terminate(limit: Double = 30) async -> (status: Int32, seconds: Double)? {
        ended.withLock { $0 = .stopped }
        let started = Date()
        helper.kill(SIGTERM)
        let deadline = started.addingTimeInterval(limit)
        while helper.process.isRunning, Date() < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        let seconds = Date().timeIntervalSince(started)
        guard !helper.process.isRunning else {
            killGroup(pid)
            let helper = helper
            _ = await helper.finish(limit: 15, status: nil)
            return nil
        }
        let helper = helper
        _ = await helper.finish(limit: 15, status: nil)
        return (helper.process.terminationStatus, seconds)
    }

    /// The expiries it printed so far (complete lines only).
    func printed() -> [PrintedExpiry] {
        guard let data = FileManager.default.contents(atPath: outputPath) else { return [] }
        var lines = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        lines.removeLast()  // empty after the last newline, or a line still being written
        return lines.compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  object["event"] as? String == "expired", let key = object["key"] as? String,
                  let generation = (object["generation"] as? NSNumber)?.int64Value
            else { return nil }
            return PrintedExpiry(key: key, generation: generation, lateMs: (object["late_ms"] as? NSNumber)?.int64Value ?? -1)
        }
    }

    /// Its lines that are not expiries (there should be none).
    func strayLines() -> [String] {
        guard let data = FileManager.default.contents(atPath: outputPath) else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
            .filter { !$0.contains("\"event\":\"expired\"") && $0.hasSuffix("}") }
    }
}

// MARK: - Writers

/// One writer of a fleet: a `countdown` process per change, or a store in the test process.
enum FleetWriter: Sendable {
    case process(url: String)
    case store(CountdownStore)

    /// Starts countdown `key` of `milliseconds`.
    func start(_ key: String, milliseconds: Int64) async throws {
        switch self {
        case .process(let url):
            try await Self.run(url, ["start", key, "\(milliseconds)ms"], accepting: [0])
        case .store(let store):
            try await store.start(key, duration: .milliseconds(milliseconds))
        }
    }

    /// Extends countdown `key` by `milliseconds` (a new generation); an item that has already
    /// expired refuses, which is fine.
    func extend(_ key: String, milliseconds: Int64) async throws {
        switch self {
        case .process(let url):
            try await Self.run(url, ["extend", key, "\(milliseconds)ms"], accepting: [0, 65])
        case .store(let store):
            do {
                try await store.extend(key, by: .milliseconds(milliseconds))
            } catch {
                if error.code.category != .conflict { throw error }
            }
        }
    }

    private static func run(_ url: String, _ arguments: [String], accepting: [Int32]) async throws {
        let result = await onThread { () -> (Int32, String)? in
            guard let result = try? HelperProcess.run(countdownBinary, ["--db", url] + arguments, limit: 60) else { return nil }
            return (result.status, result.stderr)
        }
        guard let (status, stderr) = result else { throw FleetFailure("cannot start countdown \(arguments.joined(separator: " "))") }
        guard accepting.contains(status) else {
            Issue.record("countdown \(arguments.joined(separator: " ")) failed with status \(status): \(stderr.suffix(2000))")
            throw FleetFailure("a writer failed")
        }
    }
}

/// The plan of a writer: which keys it starts, how long each runs, which it extends, and the
/// pauses between them, drawn from a seeded generator so that a run can be replayed.
struct FleetPlan: Sendable {
    struct Step: Sendable {
        let key: String
        let milliseconds: Int64
        let extendBy: Int64?
        let pauseMs: Int64
    }

    let steps: [[Step]]

    /// `items` countdowns over `writers` writers, of `shortest`…`longest` ms; every fifth is
    /// extended (a second generation) right after it starts.
    init(items: Int, writers: Int, prefix: String, shortest: Int64 = 1500, longest: Int64 = 3000, seed: UInt64) {
        var generator = SeededGenerator(state: seed)
        var steps = Array(repeating: [Step](), count: writers)
        for index in 0..<items {
            steps[index % writers].append(
                Step(
                    key: "\(prefix)-\(index)", milliseconds: Int64.random(in: shortest...longest, using: &generator),
                    extendBy: index % 5 == 0 ? 500 : nil, pauseMs: Int64.random(in: 0...200, using: &generator)))
        }
        self.steps = steps
    }

    var keys: [String] { steps.flatMap { $0.map(\.key) } }

    /// Runs every writer's steps, the writers side by side.
    func run(_ writers: [FleetWriter]) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (writer, steps) in zip(writers, self.steps) {
                group.addTask {
                    for step in steps {
                        try await writer.start(step.key, milliseconds: step.milliseconds)
                        if let extra = step.extendBy { try await writer.extend(step.key, milliseconds: extra) }
                        try await Task.sleep(for: .milliseconds(step.pauseMs))
                    }
                }
            }
            try await group.waitForAll()
        }
    }
}

// MARK: - The fleet

/// A fleet scenario's server, schema, hosts and stores; ``tearDown()`` ends them all.
final class Fleet: Sendable {
    let server: TestPostgres
    let database: FleetDatabase
    let folder: TemporaryFolder
    /// Whether the server is this fleet's own (discarded at the end).
    let ownsServer: Bool
    private let hosts = Locked<[FleetHost]>([])
    private let stores = Locked<[CountdownStore]>([])

    /// A fleet on `server`, in a new schema.
    init(server: TestPostgres, ownsServer: Bool) throws {
        self.server = server
        self.ownsServer = ownsServer
        database = FleetDatabase(server: server, schema: PostgresFixtures.newSchema())
        folder = try TemporaryFolder()
    }

    /// The hosts started so far.
    var allHosts: [FleetHost] { hosts.withLock { $0 } }

    /// Starts a host.
    @discardableResult
    func startHost(_ name: String, url: String, address: String? = nil, clockOffset: String? = nil) throws -> FleetHost {
        let host = try FleetHost(name: name, url: url, folder: folder, address: address, clockOffset: clockOffset)
        hosts.withLock { $0.append(host) }
        return host
    }

    /// Opens a store in the test process on `url` (closed by ``tearDown()``).
    func openStore(url: String) async throws -> CountdownStore {
        let store = try await CountdownStore(postgresURL: url)
        stores.withLock { $0.append(store) }
        return store
    }

    /// Whether every host is running or was ended by the test (one that died is reported).
    func hostsAlive() -> Bool {
        allHosts.map { $0.check() }.allSatisfy { $0 }
    }

    /// The host whose pid holds the lease, if one of them does.
    func holder(_ lease: FleetLease) -> FleetHost? {
        allHosts.first { $0.pid == lease.pid }
    }

    /// Ends every host (gracefully if it still runs), closes the stores and the test's client,
    /// and discards the server if it is the fleet's own.
    func tearDown() async {
        for host in allHosts { await host.stop() }
        for store in stores.withLock({ $0 }) { try? await store.close() }
        database.close()
        if ownsServer {
            let server = server
            await onThread { server.discard() }
        }
    }

    /// Runs `body` on a new fleet and tears it down afterwards, whatever happens.
    static func run(
        server: TestPostgres, ownsServer: Bool, _ body: (Fleet) async throws -> Void
    ) async throws {
        guard let fleet = try? Fleet(server: server, ownsServer: ownsServer) else {
            if ownsServer { server.discard() }
            throw FleetFailure("cannot create a temporary folder")
        }
        do {
            try await body(fleet)
        } catch {
            for host in fleet.allHosts where host.helper.process.isRunning { killGroup(host.pid, SIGCONT) }
            if let folder = server.folder {
                for log in ["server.log", "pgbouncer.log"] {
                    guard let text = FileManager.default.contents(atPath: "\(folder)/\(log)") else { continue }
                    Issue.record("the end of \(log): \(String(decoding: text, as: UTF8.self).suffix(1500))")
                }
            }
            await fleet.tearDown()
            throw error
        }
        await fleet.tearDown()
    }
}

// MARK: - Checks

/// What a fleet run measured, for the report.
struct FleetFigures: Sendable {
    var expiries = 0
    var lateP50Ms: Int64 = 0
    var lateP99Ms: Int64 = 0
    var lateMaxMs: Int64 = 0
    var printedLines = 0

    /// One line of the reliability report.
    func line(_ scenario: String, extra: String = "") -> String {
        "postgres fleet \(scenario): \(expiries) expiries, \(printedLines) lines printed, late p50 \(lateP50Ms) ms, p99 \(lateP99Ms) ms, max \(lateMaxMs) ms\(extra)"
    }
}

/// Appends `line` to the file `COUNTDOWN_RELIABILITY_REPORT` names, if any.
func fleetReport(_ line: String) {
    guard let file = ProcessInfo.processInfo.environment["COUNTDOWN_RELIABILITY_REPORT"] else { return }
    try? (line + "\n").appendLine(to: file)
}

extension Fleet {
    /// Waits until every one of `keys` has expired and the hosts printed every expiry, then
    /// checks the record:
    /// - each expiry (key and generation) is recorded exactly once, and every key's last
    ///   generation expired;
    /// - none early: fired at or after its deadline, and the deadline is no sooner than the
    ///   start the database recorded plus the duration;
    /// - none of a stale generation: no expiry of a generation recorded after an event of a
    ///   newer generation of its key;
    /// - the hosts' printed lines together cover every expiry, and none is printed twice except
    ///   by a killed host (hosts sharing one consumer claim each expiry).
    func verifyExpiries(of keys: [String], limit: Double = 60) async throws -> FleetFigures {
        let database = database
        try await fleetEventually("all \(keys.count) countdowns expired", limit: limit, alive: { self.hostsAlive() }) {
            try await database.integer("SELECT count(*) FROM \(database.table("countdowns")) WHERE state = 'expired'") == Int64(keys.count)
        }
        let expiries = try await database.expiries()
        let items = try await database.items()
        #expect(Set(items.map(\.key)) == Set(keys), "the items are the keys the writers started")
        #expect(items.allSatisfy { $0.state == "expired" })

        var recorded: [ExpiryID: Int] = [:]
        for expiry in expiries { recorded[ExpiryID(key: expiry.key, generation: expiry.generation), default: 0] += 1 }
        let twice = recorded.filter { $0.value > 1 }.keys.map(\.description).sorted()
        #expect(twice.isEmpty, "each expiry recorded exactly once; more than once: \(twice.prefix(20))")
        for item in items {
            #expect(recorded[ExpiryID(key: item.key, generation: item.generation)] == 1, "\(item.key)'s last generation \(item.generation) expired once")
        }

        let early = expiries.filter { $0.fired_at_ms < $0.deadline_at_ms || $0.late_ms < 0 }
        #expect(early.isEmpty, "no expiry fired before its deadline: \(early.prefix(10))")
        let itemsByKey = Dictionary(uniqueKeysWithValues: items.map { ($0.key, $0) })
        var beforeStart: [String] = []
        for expiry in expiries {
            guard let item = itemsByKey[expiry.key], item.generation == expiry.generation, let duration = item.duration_ms else { continue }
            if expiry.deadline_at_ms < item.started_at_ms + duration + item.paused_ms {
                beforeStart.append(
                    "\(expiry.key) (\(item.policy)): deadline \(expiry.deadline_at_ms) before the recorded start \(item.started_at_ms) + \(duration) ms"
                        + "; W − timeline at start \(item.started_at_ms - item.start_offset_ms - (item.policy == "wall" ? item.gap_at_start_ms : 0))")
            }
        }
        if !beforeStart.isEmpty {
            // The mapping between W and the wall timeline at each checkpoint, where it changed.
            let clock = try await database.clockAudit()
            var changes: [String] = []
            var last: Int64?
            for row in clock where row.mapping_ms != last || row.floor_excess_ms != 0 {
                changes.append("#\(row.id) via \(row.server_addr ?? "?") W−T \(row.mapping_ms) floor+\(row.floor_excess_ms) boot \(row.boot_id ?? "-") skew \(row.clock_skew_ms)")
                last = row.mapping_ms
            }
            Issue.record("expiries recorded before start + duration: \(beforeStart.prefix(10)); checkpoint mapping changes: \(changes.prefix(40))")
        }

        let stamps = try await database.fetch(
            FleetEventStamp.self,
            "SELECT id, kind, key, generation FROM \(database.table("countdown_events")) WHERE key IS NOT NULL ORDER BY id")
        var newest: [String: Int64] = [:]
        var stale: [String] = []
        for stamp in stamps {
            guard let key = stamp.key, let generation = stamp.generation else { continue }
            if stamp.kind == "expired", let seen = newest[key], seen > generation { stale.append("\(key)#\(generation) after #\(seen)") }
            newest[key] = max(newest[key] ?? generation, generation)
        }
        #expect(stale.isEmpty, "no expiry of a stale generation: \(stale.prefix(10))")

        let wanted = Set(recorded.keys)
        let hosts = allHosts
        try await fleetEventually("the hosts printed all \(wanted.count) expiries", limit: 30, alive: { self.hostsAlive() }) {
            let printed = Set(hosts.flatMap { $0.printed() }.map { ExpiryID(key: $0.key, generation: $0.generation) })
            return wanted.isSubset(of: printed)
        }
        var printedBy: [ExpiryID: [FleetHost]] = [:]
        var lines = 0
        for host in hosts {
            let printed = host.printed()
            lines += printed.count
            let unknown = printed.filter { !wanted.contains(ExpiryID(key: $0.key, generation: $0.generation)) }
            #expect(unknown.isEmpty, "\(host.name) printed only recorded expiries: \(unknown.prefix(5))")
            for line in printed { printedBy[ExpiryID(key: line.key, generation: line.generation), default: []].append(host) }
            #expect(host.strayLines().isEmpty, "\(host.name) printed only expiries")
        }
        // Printed twice only where a printer was killed before it could acknowledge, or frozen
        // between printing and acknowledging (one event per freeze at most: a frozen reader's
        // other claimed events are checked again when it wakes).
        let repeated = printedBy.filter { _, printers in printers.count > 1 && !printers.contains { $0.wasKilled } }
        let frozenAtOnce = repeated.filter { _, printers in printers.contains { $0.stops > 0 } }
        let stops = hosts.map(\.stops).reduce(0, +)
        #expect(
            repeated.count == frozenAtOnce.count && frozenAtOnce.count <= stops,
            "each expiry printed by one host (\(stops) freezes): \(repeated.keys.map(\.description).sorted().prefix(10))")

        let late = expiries.map(\.late_ms).sorted()
        var figures = FleetFigures()
        figures.expiries = expiries.count
        figures.printedLines = lines
        if !late.isEmpty {
            figures.lateP50Ms = late[late.count / 2]
            figures.lateP99Ms = late[min(late.count - 1, late.count * 99 / 100)]
            figures.lateMaxMs = late.last ?? 0
        }
        return figures
    }

    /// Checks the lease's history in the audit: the term moves on exactly when the holder
    /// changes to another instance, and a new holder took the lease only once the previous
    /// one's had run out (on the store clock): one holder at a time. Returns how many times
    /// the holder changed.
    @discardableResult
    func verifyLeaseFencing() async throws -> Int {
        var takeovers = 0
        for row in try await database.audit() where row.tbl == "lease" {
            guard let newTerm = row.lease_term, let oldTerm = row.old_term else { continue }
            if let holder = row.lease_holder, holder != row.old_holder {
                #expect(newTerm == oldTerm + 1, "the term moves on by one when the lease passes to \(holder): \(row)")
                takeovers += 1
                if row.old_holder != nil, let acquired = row.new_acquired_at_ms, let expired = row.old_expires_at_ms {
                    #expect(acquired >= expired, "\(holder) took the lease of \(row.old_holder ?? "") only after it ran out: \(row)")
                }
            } else {
                #expect(newTerm == oldTerm, "the term stays while the holder stays or releases: \(row)")
            }
        }
        return takeovers
    }
}
