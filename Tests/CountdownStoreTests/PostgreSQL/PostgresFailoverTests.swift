@testable import CountdownStorePostgres
import Foundation
import PostgresNIO
import Testing

@testable import CountdownStoreCore

/// A primary and a streaming standby made with Debian's tools, and everyone who uses them —
/// `countdown run` hosts, writers and a reader in this process — each reaching the two servers
/// through proxies of its own, so that a path can be cut silently (nothing forwarded, nothing
/// closed) and a failed primary's slot can be given to a new standby. Everyone's connection
/// string names both slots with `target_session_attrs=read-write`.
final class FaultCluster {
    /// The two slots' servers: one primary, one standby (`nil` while none is built).
    private(set) var servers: [TestPostgres?]
    private(set) var primarySlot = 0
    let synchronous: Bool
    let schema = PostgresFixtures.newSchema()
    let folder: TemporaryFolder
    /// Each participant's proxies, one per slot.
    private var routes: [String: [SilentProxy]] = [:]
    /// The proxies of participants that name one address, which moves to the new primary at a
    /// failover (as a virtual IP or a DNS name that a failover manager moves).
    private var movingRoutes: [String: SilentProxy] = [:]
    /// The test's own view of the store, on the primary.
    private(set) var database: FleetDatabase
    private(set) var hosts: [FleetHost] = []
    private var stores: [CountdownStore] = []

    var primary: TestPostgres { servers[primarySlot]! }

    /// Starts the primary and its standby; with `synchronous`, the primary waits for the standby
    /// at every commit (`synchronous_standby_names = '*'`, set after the backup, so that a
    /// promoted standby does not inherit it).
    init(synchronous: Bool) async throws {
        self.synchronous = synchronous
        folder = try TemporaryFolder()
        let primary = try TestPostgres.dedicated(settings: ["wal_level=replica", "max_wal_senders=10", "wal_sender_timeout=5s"])
        let standby: TestPostgres
        do {
            standby = try await onThread { Result { try primary.startStandby() } }.get()
        } catch {
            primary.discard()
            throw error
        }
        servers = [primary, standby]
        database = FleetDatabase(server: primary, schema: schema)
        if synchronous { try await requireSynchronousStandby() }
    }

    /// The connection string of participant `name` (created with its proxies on first use).
    func url(_ name: String) throws -> String {
        if routes[name] == nil {
            routes[name] = try servers.map { try SilentProxy(port: $0!.port) }
        }
        let slots = routes[name]!.map { "127.0.0.1:\($0.port)" }.joined(separator: ",")
        return "postgres://postgres@\(slots)/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2"
            + "&schema=\(schema)&application_name=\(name)"
    }

    /// The connection string of participant `name` that names one moving address.
    func movingURL(_ name: String) throws -> String {
        if movingRoutes[name] == nil { movingRoutes[name] = try SilentProxy(port: primary.port) }
        return "postgres://postgres@127.0.0.1:\(movingRoutes[name]!.port)/postgres?sslmode=disable&connect_timeout=2"
            + "&schema=\(schema)&application_name=\(name)"
    }

    /// Opens a store in this process for participant `name` (through one moving address with `moving`).
    func openStore(
        _ name: String, moving: Bool = false, configuration: CountdownStore.Configuration = .init()
    ) async throws -> CountdownStore {
        let store = try await CountdownStore(
            postgresURL: moving ? try movingURL(name) : try url(name), configuration: configuration)
        stores.append(store)
        return store
    }

    /// Starts a `countdown run --consumer mailer` host named `name`, its clock moved by `clockOffset`.
    @discardableResult
    func startHost(_ name: String, clockOffset: String? = nil, moving: Bool = false) throws -> FleetHost {
        let host = try FleetHost(name: name, url: moving ? try movingURL(name) : try url(name), folder: folder, clockOffset: clockOffset)
        hosts.append(host)
        return host
    }

    func hostsAlive() -> Bool { hosts.map { $0.check() }.allSatisfy { $0 } }

    /// The host holding the lease, if a host does.
    func holder(_ lease: FleetLease) -> FleetHost? { hosts.first { $0.pid == lease.pid } }

    /// Waits until a host holds a live lease; returns it.
    func waitForHolder(_ what: String, limit: Double = 30) async throws -> (FleetLease, FleetHost) {
        let database = database
        try await fleetEventually(what, limit: limit, alive: { self.hostsAlive() }) {
            let lease = try await database.lease()
            let now = try await database.integer("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint") ?? 0
            return self.holder(lease) != nil && lease.expires_at_ms > now
        }
        let lease = try await database.lease()
        return (lease, try #require(holder(lease)))
    }

    /// Waits until every running host has a session on the primary again (after a fault, its
    /// pool may still be waiting before its next attempt to connect).
    func waitForHostSessions(limit: Double = 30) async throws {
        let names = hosts.filter { $0.helper.process.isRunning }.map(\.name)
        let database = database
        try await fleetEventually("every host has a session on the primary again", limit: limit, alive: { self.hostsAlive() }) {
            let list = names.map { "'\($0)'" }.joined(separator: ",")
            return try await database.integer(
                "SELECT count(DISTINCT application_name) FROM pg_stat_activity WHERE application_name IN (\(list))") == Int64(names.count)
        }
    }

    /// Cuts (or restores) every path of participant `name`.
    func set(_ name: String, _ mode: SilentProxy.Mode) {
        for proxy in (routes[name] ?? []) + [movingRoutes[name]].compactMap({ $0 }) { proxy.set(mode) }
    }

    // MARK: Faults

    /// Kills the primary (immediate shutdown, as a crash), promotes the standby, and, once the
    /// new primary takes writes, builds a new standby in the old primary's slot. Returns when
    /// the old primary died and when the promotion ended.
    func failover() async throws -> (killed: Date, promoted: Date) {
        let old = primarySlot
        let new = 1 - old
        let dead = servers[old]!
        let standby = servers[new]!
        try await onThread { Result { try dead.pgCtl(["stop", "-m", "immediate"]) } }.get()
        let killed = Date()
        try await onThread { Result { try standby.pgCtl(["promote"]) } }.get()
        let promoted = Date()
        for proxy in movingRoutes.values { proxy.retarget(port: standby.port) }
        primarySlot = new
        database.close()
        database = FleetDatabase(server: standby, schema: schema)
        await onThread { dead.discard() }
        // What a failover manager does next: a new standby for the new primary.
        let rebuilt = try await onThread { Result { try standby.startStandby() } }.get()
        servers[old] = rebuilt
        for proxies in routes.values { proxies[old].retarget(port: rebuilt.port) }
        if synchronous { try await requireSynchronousStandby() }
        return (killed, promoted)
    }

    /// Restarts the primary (a fast shutdown and start); with synchronous replication, waits
    /// until the standby streams to it again (until then, the primary commits nothing).
    func restartPrimary() async throws {
        let primary = primary
        try await onThread { Result { try primary.pgCtl(["restart", "-m", "fast"]) } }.get()
        if synchronous { try await waitForSynchronousStandby() }
    }

    /// Sets `synchronous_standby_names = '*'` on the primary and waits until its standby streams
    /// synchronously.
    private func requireSynchronousStandby() async throws {
        try await database.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
        try await database.execute("SELECT pg_reload_conf()")
        try await waitForSynchronousStandby()
    }

    /// Waits until the primary's standby streams synchronously.
    private func waitForSynchronousStandby() async throws {
        let database = database
        try await fleetEventually("the standby replicates synchronously", limit: 60) {
            try await database.integer("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'") == 1
        }
    }

    /// Ends everything: hosts, stores, proxies, servers.
    func tearDown() async {
        for host in hosts { await host.stop() }
        for store in stores { try? await store.close() }
        for proxies in routes.values { proxies.forEach { $0.close() } }
        for proxy in movingRoutes.values { proxy.close() }
        database.close()
        let servers = servers
        await onThread { servers.forEach { $0?.discard() } }
    }
}

/// A row of `pg_stat_activity`, for a failure's report.
struct ClaimRow: Decodable, Sendable {
    let first_event_id: Int64
    let last_event_id: Int64
    let acked_through: Int64
    let claimant: String
    let claimed_until_ms: Int64
    let now_ms: Int64
}

struct ActivityRow: Decodable, Sendable {
    let application_name: String?
    let state: String?
    let wait_event_type: String?
    let wait_event: String?
    let query: String?
    let xact_ms: Int64?
}

/// One fault of a schedule.
enum ScheduledFault: String, CaseIterable, Sendable {
    /// The primary killed and the standby promoted.
    case failover
    /// The lease holder's paths silent both ways, then healed.
    case holderPartition
    /// What the lease holder sends stands still; the server's answers still come.
    case holderOneWayPartition
    /// A host that does not hold the lease cut off, then healed.
    case standbyHostPartition
    /// The primary restarted.
    case primaryRestart
    /// The lease holder cut off and asked to stop while cut off; a new host takes its place.
    case stopWhileCut
}

extension RealProcesses {
/// Fault schedules against a PostgreSQL primary with a streaming standby: primary killed and
/// standby promoted, the lease holder's path cut silently (both ways, one way), another host's
/// path cut, the primary restarted, a host stopped while cut off; hosts with clocks an hour
/// apart. Writers start countdowns throughout, retrying what fails transiently, and a reader
/// watches remaining times; the run's history is then checked against every invariant at once
/// (``HistoryChecker``). The schedule's order and spans come from a seed, printed, and replayed
/// with `COUNTDOWN_FLEET_SEED`; `COUNTDOWN_FAULTS=N` runs N faults drawn at random (the long
/// form) instead of one of each.
@Suite("PostgreSQL failover and partitions, checked as one history", .enabled(if: fleetCanRun))
struct PostgresFailoverTests {
    static let leaseMs = CountdownStore.Configuration().leaseDuration.milliseconds
    static var faultCount: Int { suiteSize("COUNTDOWN_FAULTS", ci: 0) }

    @Test("Synchronous replication: every fault of the schedule, one history, every invariant holds")
    func synchronousSchedule() async throws {
        var generator = SeededGenerator(state: PostgresFleetTests.seed &+ 700)
        let schedule: [ScheduledFault] = Self.faultCount > 0
            ? (0..<Self.faultCount).map { _ in ScheduledFault.allCases.randomElement(using: &generator)! }
            : ScheduledFault.allCases.shuffled(using: &generator)
        try await run(schedule, synchronous: true, seed: PostgresFleetTests.seed &+ 700, generator: &generator)
    }

    @Test("Asynchronous replication: a failover, what it lost measured, every other invariant holds")
    func asynchronousFailover() async throws {
        var generator = SeededGenerator(state: PostgresFleetTests.seed &+ 800)
        try await run([.failover], synchronous: false, seed: PostgresFleetTests.seed &+ 800, generator: &generator)
    }

    /// Runs `schedule` on a new cluster and checks the history.
    private func run(_ schedule: [ScheduledFault], synchronous: Bool, seed: UInt64, generator: inout SeededGenerator) async throws {
        let scenario = synchronous ? "synchronous" : "asynchronous"
        print("PostgreSQL failover suite (\(scenario)): schedule \(schedule.map(\.rawValue)), seed \(seed)")
        let cluster = try await FaultCluster(synchronous: synchronous)
        do {
            try await exercise(cluster, schedule, scenario: scenario, seed: seed, generator: &generator)
        } catch {
            for server in cluster.servers.compactMap({ $0 }) {
                if let folder = server.folder, let text = FileManager.default.contents(atPath: "\(folder)/server.log") {
                    Issue.record("the end of a server's log (port \(server.port)): \(String(decoding: text, as: UTF8.self).suffix(1500))")
                }
            }
            await cluster.tearDown()
            for host in cluster.hosts {
                Issue.record("\(host.name)'s stderr ends: \(host.helper.stderr.suffix(1500))")
            }
            throw error
        }
        await cluster.tearDown()
    }

    private func exercise(
        _ cluster: FaultCluster, _ schedule: [ScheduledFault], scenario: String, seed: UInt64, generator: inout SeededGenerator
    ) async throws {
        let history = History(seed: seed)
        let writerStores = [
            try await cluster.openStore("writer-0"), try await cluster.openStore("writer-1"),
            try await cluster.openStore("writer-moving", moving: true),
        ]
        try await cluster.database.installAudit()
        let reader = try await cluster.openStore("reader")
        let sentinels = ["sentinel-0", "sentinel-1", "sentinel-2"]
        for key in sentinels { try await history.start(key, milliseconds: 600_000, writer: "writer-0", store: writerStores[0]) }
        try cluster.startHost("host-0")
        try cluster.startHost("host-1", clockOffset: "+1h")
        try cluster.startHost("host-2", clockOffset: "-1h")
        try cluster.startHost("host-moving", moving: true)
        _ = try await cluster.waitForHolder("a host holds the lease")

        // Writers start countdowns of 1–3 s throughout, 50–300 ms apart; a reader watches the sentinels.
        let writing = Locked(true)
        let keys = Locked<[String]>([])
        var writers: [Task<Void, any Error>] = []
        for (index, store) in writerStores.enumerated() {
            var plan = SeededGenerator(state: seed &+ UInt64(index) &* 7919)
            writers.append(Task {
                var number = 0
                while writing.withLock({ $0 }) {
                    let key = "w\(index)-\(number)"
                    number += 1
                    keys.withLock { $0.append(key) }
                    try await history.start(key, milliseconds: Int64.random(in: 1000...3000, using: &plan), writer: "writer-\(index)", store: store)
                    try await Task.sleep(for: .milliseconds(Int64.random(in: 50...300, using: &plan)))
                }
            })
        }
        let watching = Task { await history.watchRemaining(sentinels, store: reader) }
        // A consumer whose effect (a row) commits with its acknowledgement, read by two readers
        // of this process with the hosts' short claim timeout: each expiry takes effect once.
        let effects = cluster.database.table("effects")
        try await cluster.database.execute(
            "CREATE TABLE \(effects) (key text NOT NULL, generation bigint NOT NULL, reader text NOT NULL)")
        var effectConfiguration = CountdownStore.Configuration()
        effectConfiguration.claimTimeout = .seconds(3)
        let acknowledgements = Locked<[String: Int]>([:])
        var effectReaders: [Task<Void, Never>] = []
        for index in 0..<2 {
            let store = try await cluster.openStore("effects-\(index)", configuration: effectConfiguration)
            _ = try await store.consumer("effects")
            effectReaders.append(Task { await Self.applyEffects(store, reader: "effects-\(index)", table: effects, acknowledgements) })
        }

        var figures: [String] = []
        var failovers: [(killed: Date, promoted: Date)] = []
        var replacements = 0
        var previous: String?
        try await Task.sleep(for: .seconds(2))
        for fault in schedule {
            try await cluster.waitForHostSessions()
            let (lease, holder) = try await cluster.waitForHolder("a host holds the lease before \(fault.rawValue)")
            let spanMs = Int64.random(in: 3000...6000, using: &generator)
            switch fault {
            case .failover:
                let (killed, promoted) = try await history.fault("failover") { try await cluster.failover() }
                let (after, _) = try await cluster.waitForHolder("a host holds the lease after the promotion", limit: 60)
                // The holder that carries on keeps its term; a new holder takes a higher one.
                #expect(after.term >= lease.term && (after.holder == lease.holder || after.term > lease.term), "\(lease) → \(after)")
                failovers.append((killed, promoted))
            case .holderPartition, .holderOneWayPartition, .stopWhileCut:
                let mode: SilentProxy.Mode = fault == .holderOneWayPartition ? .clientToServerCut : .silent
                let beforeCut = try await cluster.database.auditIDs()
                let cutAt = Date()
                let takeover = try await history.fault(fault.rawValue) { () -> (Int64?, Double?) in
                    cluster.set(holder.name, mode)
                    try await Task.sleep(for: .milliseconds(300))
                    // The lease as the cut-off holder left it (a renewal already on its way may have
                    // landed). After a fault that broke every connection (a primary restart), the
                    // lease seen live before the cut may be one its holder could no longer renew:
                    // another host may hold it by now, and nothing is left to take over.
                    let left = try await cluster.database.lease()
                    let cutHeld = cluster.holder(left)?.pid == holder.pid
                    do {
                        try await fleetEventually("another host took over from \(holder.name)", limit: 30, alive: { cluster.hostsAlive() }) {
                            let now = try await cluster.database.lease()
                            return cluster.holder(now).map { $0.pid != holder.pid } ?? false
                        }
                    } catch {
                        // What the server was doing, and the clocks as the holders saved them.
                        let activity = try? await cluster.database.fetch(
                            ActivityRow.self,
                            "SELECT application_name, state, wait_event_type, wait_event, left(query, 80) AS query, "
                                + "floor(extract(epoch FROM now() - xact_start) * 1000)::bigint AS xact_ms FROM pg_stat_activity WHERE application_name <> ''")
                        let clocks = (try? await cluster.database.clockAudit().suffix(8)) ?? []
                        let now = try? await cluster.database.integer("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint")
                        Issue.record(
                            "no takeover after \(previous ?? "nothing"): lease \((try? await cluster.database.lease()).map { "\($0)" } ?? "?"), server clock \(now ?? 0); activity \(activity ?? []); last checkpoints \(clocks)")
                        throw error
                    }
                    let after = try await cluster.database.lease()
                    let took = cutHeld ? try #require(after.acquired_at_ms) - (left.expires_at_ms - Self.leaseMs) : nil
                    if let took, took > 2 * Self.leaseMs {
                        let leases = try await cluster.database.audit(since: beforeCut).filter { $0.tbl == "lease" }
                        let before = previous ?? "nothing"
                        Issue.record(
                            "\(fault.rawValue) after \(before): taken over \(took) ms after \(holder.name)'s last heartbeat (lease \(Self.leaseMs) ms); left \(left), now \(after); lease rows since the cut: \(leases.prefix(12))")
                    }
                    var stopSeconds: Double?
                    if fault == .stopWhileCut {
                        let ended = await holder.terminate(limit: 30)
                        #expect(ended != nil, "\(holder.name), cut off, stops when asked")
                        stopSeconds = ended?.seconds
                        #expect((ended?.seconds ?? 99) <= Double(Self.leaseMs) / 1000 + 10, "stopped \(ended?.seconds ?? -1) s after SIGTERM")
                    }
                    let remaining = spanMs - Int64(Date().timeIntervalSince(cutAt) * 1000)
                    if remaining > 0 { try await Task.sleep(for: .milliseconds(remaining)) }
                    return (took, stopSeconds)
                }
                let healedIDs = try await cluster.database.auditIDs()
                cluster.set(holder.name, .forwarding)
                if fault == .stopWhileCut {
                    replacements += 1
                    try cluster.startHost("host-r\(replacements)")
                } else {
                    // Several of its heartbeats later, it has written nothing under its old term.
                    try await Task.sleep(for: .milliseconds(3 * Self.leaseMs))
                    let stale = try await cluster.database.audit(since: healedIDs).filter {
                        $0.app == holder.name && $0.lease_holder == lease.holder && $0.lease_term == lease.term
                    }
                    #expect(stale.isEmpty, "\(holder.name) wrote nothing as holder under its old term after the heal: \(stale.prefix(5))")
                }
                let expiries = try await cluster.database.expiries()
                let cutMs = Int64(cutAt.timeIntervalSince1970 * 1000)
                let worst = expiries.filter { $0.deadline_at_ms >= cutMs && $0.deadline_at_ms <= cutMs + spanMs }.map(\.late_ms).max()
                figures.append(
                    "\(fault.rawValue) of \(spanMs) ms: "
                        + (takeover.0.map { "taken over \($0) ms after the last heartbeat" } ?? "the lease had moved to another host before the cut")
                        + ", worst lateness meanwhile "
                        + "\(worst.map { "\($0) ms" } ?? "-")\(takeover.1.map { String(format: ", stopped %.1f s after SIGTERM", $0) } ?? "")")
            case .standbyHostPartition:
                guard let other = cluster.hosts.first(where: { $0.pid != holder.pid && $0.helper.process.isRunning }) else { continue }
                try await history.fault(fault.rawValue) {
                    cluster.set(other.name, .silent)
                    try await Task.sleep(for: .milliseconds(spanMs))
                    cluster.set(other.name, .forwarding)
                }
                figures.append("\(fault.rawValue) of \(spanMs) ms (\(other.name))")
            case .primaryRestart:
                let started = Date()
                try await history.fault(fault.rawValue) { try await cluster.restartPrimary() }
                figures.append("primary restart: \(Int(Date().timeIntervalSince(started) * 1000)) ms")
            }
            previous = fault.rawValue
            try await Task.sleep(for: .seconds(2))
        }

        writing.withLock { $0 = false }
        for writer in writers { try await writer.value }
        watching.cancel()
        _ = await watching.value

        // Every countdown comes due; the hosts deliver every expiry.
        let all = keys.withLock { $0 }
        let database = cluster.database
        try await fleetEventually("all \(all.count) countdowns expired", limit: 90, alive: { cluster.hostsAlive() }) {
            try await database.integer("SELECT count(*) FROM \(database.table("countdowns")) WHERE state = 'expired'") ?? 0 >= Int64(all.count)
        }
        let recorded = Set(try await database.expiries().map { ExpiryID(key: $0.key, generation: $0.generation) })
        try await fleetEventually("the hosts delivered all \(recorded.count) expiries", limit: 60, alive: { cluster.hostsAlive() }) {
            recorded.isSubset(of: Set(cluster.hosts.flatMap { $0.printed() }.map { ExpiryID(key: $0.key, generation: $0.generation) }))
        }
        // Every expiry took effect once, its row committed with its acknowledgement.
        do {
            try await fleetEventually("the effects consumer applied all \(recorded.count) expiries", limit: 60, alive: { true }) {
                try await database.integer("SELECT count(DISTINCT (key, generation)) FROM \(effects)") ?? 0 >= Int64(recorded.count)
            }
        } catch {
            // Where the effects consumer stands: its cursor and claims, and how its transactions ended.
            let claims = try? await database.fetch(
                ClaimRow.self,
                "SELECT first_event_id, last_event_id, acked_through, claimant, claimed_until_ms, "
                    + "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms FROM "
                    + "\(database.table("countdown_consumer_claims")) WHERE consumer = 'effects' ORDER BY first_event_id")
            let cursor = try? await database.integer(
                "SELECT last_event_id FROM \(database.table("countdown_consumers")) WHERE name = 'effects'")
            let activity = try? await database.fetch(
                ActivityRow.self,
                "SELECT application_name, state, wait_event_type, wait_event, left(query, 80) AS query, "
                    + "floor(extract(epoch FROM now() - xact_start) * 1000)::bigint AS xact_ms FROM pg_stat_activity "
                    + "WHERE application_name LIKE 'effects%'")
            let outcomes = acknowledgements.withLock { $0 }
            let cursorText = cursor.map { String($0) } ?? "?"
            Issue.record(
                Comment(
                    rawValue: "effects consumer: cursor \(cursorText), claims \(claims ?? []), outcomes \(outcomes), "
                        + "sessions \(activity ?? [])"))
            throw error
        }
        for reader in effectReaders { reader.cancel() }
        for reader in effectReaders { await reader.value }
        let applied = try await database.integer("SELECT count(*) FROM \(effects)") ?? 0
        let distinct = try await database.integer("SELECT count(DISTINCT (key, generation)) FROM \(effects)") ?? 0
        #expect(applied == distinct, "\(applied - distinct) effects applied twice")
        #expect(distinct == Int64(recorded.count), "\(distinct) effects for \(recorded.count) expiries")
        let acknowledged = acknowledgements.withLock { $0 }
        figures.append(
            "effects consumer: \(distinct) expiries took effect, \(applied - distinct) twice; acknowledgements "
                + acknowledged.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", "))
        // What each failover cost, from the whole history.
        let expiries = try await database.expiries()
        for (killed, promoted) in failovers {
            let promotedMs = Int64(promoted.timeIntervalSince1970 * 1000)
            let killedMs = Int64(killed.timeIntervalSince1970 * 1000)
            let firstWrite = history.allOperations.filter { $0.outcome == .ok && $0.completedAt > killed }.map(\.completedAt).min()
            let firstExpiry = expiries.map(\.fired_at_ms).filter { $0 >= promotedMs }.min()
            let worst = expiries.filter { $0.deadline_at_ms >= killedMs - 1000 && $0.deadline_at_ms <= promotedMs + 10_000 }.map(\.late_ms).max()
            #expect((worst ?? 0) <= Self.leaseMs + 5000, "expiries resume within the lease duration plus 5 s of the promotion: \(worst ?? 0) ms late")
            let refused = history.allOperations.filter {
                if case .indeterminate = $0.outcome { return $0.invokedAt >= killed.addingTimeInterval(-1) && $0.invokedAt <= promoted.addingTimeInterval(10) }
                return false
            }.count
            figures.append(
                "failover: promoted \(Int(promoted.timeIntervalSince(killed) * 1000)) ms after the kill; first write acknowledged "
                    + "\(firstWrite.map { "\(Int($0.timeIntervalSince(promoted) * 1000)) ms" } ?? "-") after the promotion, first expiry "
                    + "\(firstExpiry.map { "\($0 - promotedMs) ms" } ?? "-") after it, worst lateness \(worst.map { "\($0) ms" } ?? "-"), "
                    + "\(refused) attempts failed transiently meanwhile")
        }
        // The hosts stop (their stderr, which says why a reader let an expiry go, is complete then).
        for host in cluster.hosts { await host.stop() }
        let verdict = try await HistoryChecker.check(
            history, database: database, hosts: cluster.hosts, keys: all,
            duplicateWindow: Double(2 * Self.leaseMs) / 1000 + 3 + 10)
        verdict.expectAll(except: cluster.synchronous ? [] : ["lostAcknowledged"], scenario, seed: seed)
        let line =
            "postgres failover suite (\(scenario)), seed \(seed): \(verdict.acknowledged) operations acknowledged, \(verdict.indeterminate) failed transiently, "
            + "\(verdict.lostAcknowledged.count) acknowledged lost, \(verdict.deadlinesBeforeStart.count) deadlines before start + duration, \(verdict.expiries) expiries, \(verdict.duplicatesNearFaults) delivered twice near a fault (\(verdict.duplicateCauses)), "
            + "terms \(verdict.terms.first ?? 0)…\(verdict.terms.last ?? 0); " + figures.joined(separator: "; ")
        print(line)
        fleetReport(line)
    }

    /// Reads the consumer `effects` of `store` and, for each expiry, inserts its effect (a row of
    /// `table`) and acknowledges it in one transaction on a connection of the store's pool,
    /// counting how each transaction ended, until the task is cancelled. A transaction that
    /// failed ends the reader (a later acknowledgement would cover the failed event): a new one
    /// reads on, and gets the event again once the claim runs out.
    static func applyEffects(
        _ store: CountdownStore, reader: String, table: String, _ outcomes: Locked<[String: Int]>
    ) async {
        guard let engine = store.engine as? PostgresEngine else { return }
        let logger = Logger(label: reader)
        while !Task.isCancelled {
            do {
                let consumer = try await store.consumer("effects")
                for try await expiry in try await consumer.events(.expiries) {
                    let outcome: String
                    do {
                        try await engine.servers.withConnection { connection in
                            try await store.transaction(on: connection) { tx in
                                try await connection.query(
                                    "INSERT INTO \(unescaped: table) VALUES (\(expiry.key ?? ""), \(expiry.generation ?? 0), \(reader))",
                                    logger: logger)
                                try await tx.acknowledge(expiry, of: consumer)
                            }
                        }
                        outcome = "committed"
                    } catch let error as CountdownError where error.code == .claimLost {
                        outcome = "rolled back (claim lost)"
                    } catch {
                        // An acknowledgement covers every event the reader was given before it:
                        // this reader stops here, and the event comes again once its claim runs out.
                        outcomes.withLock { $0["failed (the database out of reach; delivered again)", default: 0] += 1 }
                        break
                    }
                    outcomes.withLock { $0[outcome, default: 0] += 1 }
                }
            } catch {
                if Task.isCancelled { return }
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
    }
}
}

