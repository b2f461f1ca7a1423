import Foundation
import GRDB
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

extension RealProcesses {
/// Real processes on one database file: the host example, started, stopped and killed.
/// These tests wait on real time (polling the database), never assert how long anything took.
@Suite("Lease across processes")
struct LeaseProcessTests {
    /// A running host example whose output is collected (every wait bounded).
    final class Host: Sendable {
        let helper: HelperProcess
        var process: Process { helper.process }

        init(database: String) throws {
            helper = try HelperProcess([database], executable: hostExample)
        }

        var pid: Int32 { process.processIdentifier }

        /// Sends `signal` and waits (bounded) for the host to end.
        func kill(_ signal: Int32) async {
            helper.kill(signal)
            let lines = await helper.finish(status: signal == SIGKILL ? nil : 0)
            collected.withLock { $0 = lines }
        }

        private let collected = Locked<[String]>([])

        /// The lines the host printed (once it ended).
        func lines() -> [String] { collected.withLock { $0 } }
    }

    /// The pid in the lease holder's name (`host:pid:id`), if the lease is live.
    static func holderPID(_ queue: DatabaseQueue) throws -> Int32? {
        try queue.read { db -> Int32? in
            guard let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT holder FROM countdown_lease, countdown_now
                    WHERE holder IS NOT NULL AND expires_at_ms > countdown_now.wall_ms
                    """)
            else { return nil }
            let holder: String = row["holder"]
            return Int32(holder.split(separator: ":").dropLast().last ?? "")
        }
    }

    @Test(
        "After the lease holder is killed with SIGKILL, the standby takes over within two lease intervals and every countdown expires exactly once",
        .enabled(if: FileManager.default.isExecutableFile(atPath: hostExample.path)))
    func standbyTakesOverAfterSIGKILL() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path()
        let writer = try CountdownStore(path: path)
        let reader = try DatabaseQueue(path: path, configuration: { var c = GRDB.Configuration(); c.readonly = true; return c }())

        let first = try Host(database: path)
        try await eventually("the first host holds the lease") { try Self.holderPID(reader) == first.pid }
        let second = try Host(database: path)
        // For longer than a lease interval the standby tries, and fails, to take the lease.
        for _ in 0..<30 {
            #expect(try Self.holderPID(reader) == first.pid, "exactly one holder while it lives")
            try await Task.sleep(for: .milliseconds(100))
        }

        let keys = (0..<300).map { "order-\($0)" }
        try await writer.start(keys.enumerated().map { .countdown($1, duration: .milliseconds(500 + Int64($0) * 10)) })
        let leaseBefore = try await writer.grdb.read { db in try Lease(row: try Row.fetchOne(db, sql: "SELECT * FROM countdown_lease")!) }
        await first.kill(SIGKILL)
        let leaseAtDeath = try await writer.grdb.read { db in try Lease(row: try Row.fetchOne(db, sql: "SELECT * FROM countdown_lease")!) }
        try await eventually("the second host took over") { try Self.holderPID(reader) == second.pid }
        let leaseAfter = try await writer.grdb.read { db in try Lease(row: try Row.fetchOne(db, sql: "SELECT * FROM countdown_lease")!) }

        // From the store's own records: the dead holder's last heartbeat to the takeover.
        let leaseMs = CountdownStore.Configuration().leaseDuration.milliseconds
        let lastHeartbeat = leaseAtDeath.expiresAtMs - leaseMs
        #expect(leaseBefore.holder == leaseAtDeath.holder)
        #expect(try #require(leaseAfter.acquiredAtMs) - lastHeartbeat <= 2 * leaseMs)

        try await eventually("every countdown expired") {
            try reader.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM countdowns WHERE state = 'expired'") } == keys.count
        }
        let expiries = try await events(writer, kind: "expired")
        #expect(expiries.count == keys.count, "each expired exactly once")
        #expect(Set(expiries.compactMap(\.key)) == Set(keys))
        #expect(expiries.allSatisfy { ($0.lateMs ?? -1) >= 0 && $0.firedAtMs! >= $0.deadlineAtMs! }, "none early")

        await second.kill(SIGTERM)
        #expect(second.process.terminationStatus == 0, "SIGTERM stops the host gracefully")
        #expect(try Self.holderPID(reader) == nil, "the lease was freed on the way out")
        let integrity = try await writer.grdb.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") }
        #expect(integrity == "ok")
        // The surviving host printed the expiries it fired or found unacknowledged.
        #expect(second.lines().filter { $0.contains("\"event\":\"expired\"") }.count >= 1)
    }
}

}

extension Lease {
    init(row: Row) throws {
        self.init(holder: row["holder"], acquiredAtMs: row["acquired_at_ms"], expiresAtMs: row["expires_at_ms"])
    }
}
