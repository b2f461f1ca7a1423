import Foundation
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

/// The addresses a fleet's server listens on: 127.0.0.1 for the test and the writers, and one
/// loopback address per host, so that the server side of each connection names its host.
let fleetListenAddresses = "127.0.0.1,127.0.0.11,127.0.0.12,127.0.0.13"

/// The loopback address host `index` (0, 1, 2) reaches the server through.
func fleetHostAddress(_ index: Int) -> String { "127.0.0.\(11 + index)" }

/// Extra URL parameters of the hosts and writers behind PgBouncer: poll only, since a LISTEN does
/// not stay on one server connection in transaction pooling.
let fleetBouncerURLParameters = "&wakeups=poll"

extension RealProcesses {
/// Fleets of real `countdown run` hosts and writers on one PostgreSQL store: clocks an hour
/// apart, a holder killed or stopped, connections terminated and the server restarted, the
/// server's own clock moved, and PgBouncer in between. Each scenario has a server of its own.
///
/// Leases are the tool's defaults (2 s, a heartbeat every second): the tool has no option to
/// shorten them. Waits poll the database in real time, each bounded; durations of the store's
/// work are never asserted tightly. Size: `COUNTDOWN_FLEET_ITEMS` countdowns per round (40 in
/// CI), `COUNTDOWN_FLEET_ROUNDS` rounds (1 in CI); the seed is `COUNTDOWN_FLEET_SEED`, else drawn
/// and printed.
@Suite("PostgreSQL fleet of real processes", .enabled(if: fleetCanRun))
struct PostgresFleetTests {
    /// The tool's lease duration (it has no option for it).
    static let leaseMs = CountdownStore.Configuration().leaseDuration.milliseconds

    static var items: Int { suiteSize("COUNTDOWN_FLEET_ITEMS", ci: 40) }
    static var rounds: Int { suiteSize("COUNTDOWN_FLEET_ROUNDS", ci: 1) }

    /// The seed of this run's plans.
    static let seed: UInt64 = {
        let seed = ProcessInfo.processInfo.environment["COUNTDOWN_FLEET_SEED"].flatMap(UInt64.init)
            ?? UInt64(Date().timeIntervalSince1970 * 1000)
        print("PostgreSQL fleet suites: COUNTDOWN_FLEET_SEED=\(seed)")
        return seed
    }()

    /// Opens a writer store (which creates the schema), adds the audit, and starts three hosts,
    /// each through a loopback address of its own, with the given clock offsets; waits until
    /// one of them holds the lease.
    static func startFleet(
        _ fleet: Fleet, offsets: [String?] = [nil, nil, nil], port: Int? = nil, parameters: String = ""
    ) async throws -> (writers: [FleetWriter], hosts: [FleetHost]) {
        let database = fleet.database
        let direct = port == nil
        let store = try await fleet.openStore(url: database.url(port: port, extra: parameters))
        try await database.installAudit()
        var hosts: [FleetHost] = []
        for (index, offset) in offsets.enumerated() {
            let address = direct ? fleetHostAddress(index) : nil
            hosts.append(
                try fleet.startHost(
                    "host-\(index)\(offset.map { "(\($0))" } ?? "")", url: database.url(address: address, port: port, extra: parameters),
                    address: address, clockOffset: offset))
        }
        let second = try await fleet.openStore(url: database.url(port: port, extra: parameters))
        let writers: [FleetWriter] = [
            .process(url: database.url(port: port, extra: parameters)), .store(store),
            .process(url: database.url(port: port, extra: parameters)), .store(second),
        ]
        try await fleetEventually("a host holds the lease", alive: { fleet.hostsAlive() }) {
            fleet.holder(try await database.lease()) != nil
        }
        return (writers, hosts)
    }

    // MARK: 1

    @Test("Three hosts with clocks at -1 h, 0 and +1 h and four writers: every expiry recorded once, none early or stale, each printed")
    func clocksAnHourApart() async throws {
        let server = try TestPostgres.dedicated(listenAddresses: fleetListenAddresses)
        try await Fleet.run(server: server, ownsServer: true) { fleet in
            let (writers, _) = try await Self.startFleet(fleet, offsets: ["-1h", nil, "+1h"])
            var keys: [String] = []
            var figures = FleetFigures()
            for round in 0..<Self.rounds {
                let plan = FleetPlan(items: Self.items, writers: writers.count, prefix: "clocks-r\(round)", seed: Self.seed &+ UInt64(round))
                try await plan.run(writers)
                keys += plan.keys
                figures = try await fleet.verifyExpiries(of: keys)
            }
            try await fleet.verifyLeaseFencing()
            fleetReport(figures.line("clocks -1h/0/+1h"))
        }
    }

    // MARK: 2

    @Test("SIGKILL of the lease holder mid-run: another host takes over within two lease intervals, nothing lost")
    func holderKilled() async throws {
        let server = try TestPostgres.dedicated(listenAddresses: fleetListenAddresses)
        try await Fleet.run(server: server, ownsServer: true) { fleet in
            let database = fleet.database
            let (writers, _) = try await Self.startFleet(fleet)
            var keys: [String] = []
            var takeovers: [Int64] = []
            var figures = FleetFigures()
            for round in 0..<Self.rounds {
                let plan = FleetPlan(items: Self.items, writers: writers.count, prefix: "kill-r\(round)", seed: Self.seed &+ 100 &+ UInt64(round))
                let writing = Task { try await plan.run(writers) }
                let before = try await database.count(kind: "expired")
                try await fleetEventually("some countdowns of round \(round) expired", alive: { fleet.hostsAlive() }) {
                    try await database.count(kind: "expired") >= before + 3
                }
                let atDeath = try await database.lease()
                let victim = try #require(fleet.holder(atDeath), "a host holds the lease: \(atDeath)")
                await victim.kill()
                // The lease row as the dead holder left it (it may have renewed once more meanwhile).
                let left = try await database.lease()
                try await fleetEventually("another host took over from \(victim.name)", limit: 20, alive: { fleet.hostsAlive() }) {
                    let lease = try await database.lease()
                    return lease.holder != left.holder && fleet.holder(lease).map { !$0.wasKilled } == true
                }
                let after = try await database.lease()
                let lastHeartbeat = left.expires_at_ms - Self.leaseMs
                let takeover = try #require(after.acquired_at_ms) - lastHeartbeat
                takeovers.append(takeover)
                #expect(takeover <= 2 * Self.leaseMs, "taken over \(takeover) ms after the dead holder's last heartbeat (lease \(Self.leaseMs) ms)")
                #expect(after.term == left.term + 1, "one takeover, one term: \(left) -> \(after)")
                try await writing.value
                keys += plan.keys
                figures = try await fleet.verifyExpiries(of: keys)
                // Keep two hosts for the next round.
                if round + 1 < Self.rounds {
                    try fleet.startHost("host-r\(round + 1)", url: database.url(address: victim.address), address: victim.address)
                }
            }
            try await fleet.verifyLeaseFencing()
            fleetReport(figures.line("holder SIGKILL", extra: ", takeover after the last heartbeat \(takeovers.map { "\($0) ms" }.joined(separator: ", "))"))
        }
    }

    // MARK: 3

    /// The stopped host is told apart by the server address of its connections (the audit
    /// records it for every event appended and every lease update): after SIGCONT it must write
    /// neither a lease row naming itself under its old term (a heartbeat as holder) nor an
    /// event while the lease it sees is its old one (an expiry as holder). Expiries it records
    /// as a standby are allowed: any write records what came due, by the database's clock.
    @Test("SIGSTOP of the lease holder past its lease, then SIGCONT: it writes nothing as holder any more")
    func holderStoppedAndContinued() async throws {
        let server = try TestPostgres.dedicated(listenAddresses: fleetListenAddresses)
        try await Fleet.run(server: server, ownsServer: true) { fleet in
            let database = fleet.database
            let (writers, _) = try await Self.startFleet(fleet)
            let plan = FleetPlan(items: Self.items * Self.rounds, writers: writers.count, prefix: "stop", seed: Self.seed &+ 200)
            let writing = Task { try await plan.run(writers) }
            try await fleetEventually("some countdowns expired", alive: { fleet.hostsAlive() }) {
                try await database.count(kind: "expired") >= 3
            }
            let stoppedLease = try await database.lease()
            let stopped = try #require(fleet.holder(stoppedLease), "a host holds the lease: \(stoppedLease)")
            let stoppedHolder = try #require(stoppedLease.holder)
            stopped.signal(SIGSTOP)
            try await fleetEventually("another host took the stopped holder's lease", limit: 20, alive: { fleet.hostsAlive() }) {
                let lease = try await database.lease()
                return lease.holder != stoppedHolder && fleet.holder(lease) != nil
            }
            let takenOver = try await database.lease()
            let before = try await database.auditIDs()
            stopped.signal(SIGCONT)
            // Let the resumed host run through several heartbeats of its own while the new
            // holder keeps renewing: the new holder's lease runs out later by three intervals.
            try await fleetEventually("the new holder renewed three times after SIGCONT", limit: 30, alive: { fleet.hostsAlive() }) {
                let lease = try await database.lease()
                return lease.term != takenOver.term || lease.expires_at_ms >= takenOver.expires_at_ms + 3 * Self.leaseMs / 2
            }
            try await writing.value
            let figures = try await fleet.verifyExpiries(of: plan.keys)

            let after = try await database.audit(since: before)
            let address = try #require(stopped.address)
            let asHolder = after.filter { $0.lease_holder == stoppedHolder && $0.lease_term == stoppedLease.term }
            #expect(asHolder.filter { $0.tbl == "lease" }.isEmpty, "no heartbeat as holder after SIGCONT: \(asHolder.prefix(5))")
            #expect(
                asHolder.filter { $0.tbl == "event" && $0.server_addr == address }.isEmpty,
                "no event recorded by the stopped host as holder after SIGCONT: \(asHolder.prefix(5))")
            let final = try await database.lease()
            #expect(final.holder != stoppedHolder || final.term > stoppedLease.term, "the lease stays with the new holder: \(final)")
            #expect(final.term >= takenOver.term)
            try await fleet.verifyLeaseFencing()
            let standbyEvents = after.filter { $0.tbl == "event" && $0.server_addr == address }.count
            fleetReport(figures.line("holder SIGSTOP/SIGCONT", extra: ", events recorded by the resumed host as a standby \(standbyEvents)"))
        }
    }

    // MARK: 4

    /// Runs each writer's `steps` (start, extend) without pauses, the writers side by side.
    static func runPhase(_ writers: [FleetWriter], _ steps: [[FleetPlan.Step]]) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (writer, steps) in zip(writers, steps) {
                group.addTask {
                    for step in steps {
                        try await writer.start(step.key, milliseconds: step.milliseconds)
                        if let extra = step.extendBy { try await writer.extend(step.key, milliseconds: extra) }
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    @Test("pg_terminate_backend on one host's connections, then a fast server restart mid-run: hosts reconnect, nothing lost")
    func connectionsTerminatedAndServerRestarted() async throws {
        let server = try TestPostgres.dedicated(listenAddresses: fleetListenAddresses)
        try await Fleet.run(server: server, ownsServer: true) { fleet in
            let database = fleet.database
            let (writers, hosts) = try await Self.startFleet(fleet)
            let target = hosts[0]
            let address = try #require(target.address)
            let thirds = FleetPlan(items: Self.items * Self.rounds, writers: writers.count, prefix: "cut", seed: Self.seed &+ 300)
            let phases = (0..<3).map { phase in thirds.steps.map { steps in steps.enumerated().filter { $0.offset % 3 == phase }.map(\.element) } }

            try await Self.runPhase(writers, phases[0])
            try await fleetEventually("\(target.name) has connections", alive: { fleet.hostsAlive() }) {
                !clientPorts(toAddress: address, port: fleet.server.port).isEmpty
            }
            let terminated = try await database.terminate(clientPorts: clientPorts(toAddress: address, port: fleet.server.port))
            #expect(terminated >= 1, "terminated \(target.name)'s connections")
            try await Self.runPhase(writers, phases[1])
            try await fleetEventually("\(target.name) reconnected", limit: 20, alive: { fleet.hostsAlive() }) {
                !clientPorts(toAddress: address, port: fleet.server.port).isEmpty
            }

            let server = fleet.server
            try await onThread { Result { try server.pgCtl(["restart", "-m", "fast"]) } }.get()
            let renewed = Locked<FleetLease?>(nil)
            try await fleetEventually("a host holds the lease again after the restart", limit: 30, alive: { fleet.hostsAlive() }) {
                let lease = try await database.lease()
                guard fleet.holder(lease) != nil else { return false }
                if let first = renewed.withLock({ $0 }) { return lease.expires_at_ms > first.expires_at_ms || lease.holder != first.holder }
                renewed.withLock { $0 = lease }
                return false
            }
            try await Self.runPhase(writers, phases[2])
            let figures = try await fleet.verifyExpiries(of: thirds.keys)
            for host in hosts {
                try await fleetEventually("\(host.name) is connected after the restart", limit: 20, alive: { fleet.hostsAlive() }) {
                    !clientPorts(toAddress: try #require(host.address), port: fleet.server.port).isEmpty
                }
            }
            try await fleet.verifyLeaseFencing()
            fleetReport(figures.line("terminated connections and restart", extra: ", \(terminated) backends terminated"))
        }
    }

    // MARK: 5

    /// The server's clock moves by rewriting libfaketime's timestamp file; the test's own clock
    /// is real. Each countdown of D must not be seen expired before D of real time since just
    /// before its start, and must be seen expired within D + 20 s.
    @Test("The database server's clock moved to +1 h, then -1 h mid-run: no early expiry, no extension, a clock_edited event")
    func serverClockMoved() async throws {
        let clockFolder = try TemporaryFolder()
        let clockFile = clockFolder.path("faketime.rc")
        try "+0\n".write(toFile: clockFile, atomically: true, encoding: .utf8)
        chmod(clockFile, 0o644)
        let server = try TestPostgres.dedicated(environment: [
            "LD_PRELOAD": libfaketime, "FAKETIME_TIMESTAMP_FILE": clockFile, "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        ])
        try await Fleet.run(server: server, ownsServer: true) { fleet in
            let database = fleet.database
            let store = try await fleet.openStore(url: database.url())
            try await database.installAudit()
            try fleet.startHost("host-0", url: database.url())
            try fleet.startHost("host-1", url: database.url())
            try await fleetEventually("a host holds the lease", alive: { fleet.hostsAlive() }) {
                fleet.holder(try await database.lease()) != nil
            }
            let writer = FleetWriter.store(store)
            let clock = ContinuousClock()
            let slack: Duration = .seconds(20)
            var keys: [String] = []
            var overruns: [Duration] = []
            for (phase, offset) in ["+1h", "-1h"].enumerated() {
                let durations: [Int64] = (0..<max(4, Self.items / 10)).map { 2000 + Int64($0 % 4) * 1000 }
                var started: [String: (at: ContinuousClock.Instant, ms: Int64)] = [:]
                for (index, ms) in durations.enumerated() {
                    let key = "clock-\(phase)-\(index)"
                    started[key] = (clock.now, ms)
                    try await writer.start(key, milliseconds: ms)
                }
                try "\(offset)\n".write(toFile: clockFile, atomically: true, encoding: .utf8)
                chmod(clockFile, 0o644)
                let shift = try await database.integer("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint") ?? 0
                let skew = shift - Int64(Date().timeIntervalSince1970 * 1000)
                let expected: Int64 = offset == "+1h" ? 3_600_000 : -3_600_000
                #expect(abs(skew - expected) < 60_000, "the server's clock moved to \(offset): \(skew) ms from the test's")

                var seen: [String: Duration] = [:]
                let deadline = clock.now + .seconds(5) + slack
                while seen.count < started.count, clock.now < deadline {
                    guard fleet.hostsAlive() else { throw FleetFailure("a host died") }
                    let fired = Set((try? await database.expiries())?.map(\.key) ?? [])
                    let now = clock.now
                    for key in fired where seen[key] == nil { if let start = started[key] { seen[key] = start.at.duration(to: now) } }
                    try await Task.sleep(for: .milliseconds(50))
                }
                for (key, start) in started.sorted(by: { $0.key < $1.key }) {
                    let length = Duration.milliseconds(start.ms)
                    guard let elapsed = seen[key] else {
                        Issue.record("\(key) (\(start.ms) ms) not expired within \(length + slack) of real time, server clock \(offset)")
                        continue
                    }
                    #expect(elapsed >= length, "\(key) expired after \(elapsed) of real time, before its \(length) (server clock \(offset))")
                    #expect(elapsed <= length + slack, "\(key) expired after \(elapsed), extended past \(length) + \(slack)")
                    overruns.append(elapsed - length)
                }
                keys += started.keys
            }
            let figures = try await fleet.verifyExpiries(of: keys)
            let edits = try await database.count(kind: "clock_edited")
            #expect(edits >= 1, "the moved server clock was recorded as a clock edit")
            try await fleet.verifyLeaseFencing()
            fleetReport(figures.line("server clock +1h/-1h", extra: ", \(edits) clock_edited events, seen expired at most \(overruns.max() ?? .zero) after D of real time"))
        }
    }

    // MARK: 6

    @Test("Scenario 1 through PgBouncer in transaction pooling: nothing lost, the lease fenced")
    func throughPgBouncer() async throws {
        let server = try TestPostgres.dedicated()
        try await Fleet.run(server: server, ownsServer: true) { fleet in
            let port = try fleet.server.pgBouncerPort()
            let (writers, _) = try await Self.startFleet(fleet, offsets: ["-1h", nil, "+1h"], port: port, parameters: fleetBouncerURLParameters)
            var keys: [String] = []
            var figures = FleetFigures()
            for round in 0..<Self.rounds {
                let plan = FleetPlan(items: Self.items, writers: writers.count, prefix: "bouncer-r\(round)", seed: Self.seed &+ 500 &+ UInt64(round))
                try await plan.run(writers)
                keys += plan.keys
                figures = try await fleet.verifyExpiries(of: keys)
            }
            let takeovers = try await fleet.verifyLeaseFencing()
            fleetReport(figures.line("through PgBouncer", extra: ", \(takeovers) lease holder changes"))
        }
    }
}
}
