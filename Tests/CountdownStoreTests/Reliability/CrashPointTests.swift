import Foundation
import GRDB
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

/// Crash points: the helper sends itself SIGKILL at each named step of creating, migrating,
/// starting the clocks, each operation's commit, a checkpoint (before, in the middle of copying
/// pages back, after) and closing. Each time, the next open recovers by itself: the file is
/// sound, every acknowledged operation is there, and the operation in flight either committed
/// whole or not at all — committed for certain once its `COMMIT` returned.
extension RealProcesses {
@Suite("Crash points", .enabled(if: FileManager.default.isExecutableFile(atPath: tortureHelper.path)))
struct CrashPointTests {
    /// Every point the helper can die at while opening a new store.
    static var openingPoints: [String] {
        let migrations = Migration.embedded.count
        return ["create.file", "create.opened"]
            + (1...migrations).map { "migrate.before-commit@\($0)" }
            + (1...migrations).map { "migrate.after-commit@\($0)" }
            + ["clock.before-commit", "clock.after-commit"]
    }

    /// The operations of `CrashPointScript`, each killed just before and just after its commit.
    static let operations = [
        "start", "replace", "stopwatch", "pause", "resume", "extend", "shorten", "shorten-past-zero", "restart",
        "cancel", "remove", "expire-due", "prune", "acknowledge", "heartbeat", "calibrate", "suspend",
    ]

    static let checkpointPoints = ["checkpoint.before", "checkpoint.during-1", "checkpoint.during-2", "checkpoint.during-16", "checkpoint.after"]
    static let closePoints = ["close.before-checkpoint", "close.during-1", "close.during-8", "close.after-checkpoint", "close.closed"]

    /// The whole list, as `(point, operation)`.
    static var cases: [(String, String)] {
        openingPoints.map { ($0, "open") }
            + operations.flatMap { [("commit.before", $0), ("commit.after", $0)] }
            + checkpointPoints.map { ($0, "checkpoint") }
            + closePoints.map { ($0, "close") }
    }

    /// What one killed run left, checked by opening it as the next start would.
    struct Verdict {
        var failures: [String] = []
    }

    static func runAndVerify(point: String, operation: String, folder: TemporaryFolder) async throws -> Verdict {
        var verdict = Verdict()
        let path = folder.path("\(operation)-\(point).sqlite")
        let helper = try HelperProcess(["crashpoint", path, point, operation])
        let lines = await helper.finish(limit: 120, status: nil)
        let label = "\(point) during \(operation)"
        guard helper.signalled == SIGKILL else {
            let missed = lines.contains { $0.hasPrefix("missed") }
            verdict.failures.append(
                "\(label): the helper was not killed at the point (\(missed ? "never reached it" : "exit status \(helper.process.terminationStatus)")); stderr: \(helper.stderr.suffix(1000))")
            return verdict
        }
        if !lines.contains(where: { $0 == "dying at \(point)" || $0 == "armed \(point)" }) {
            verdict.failures.append("\(label): killed without reaching the point; last lines \(lines.suffix(3))")
        }
        var acknowledged: [String: String] = [:]
        var probe: (before: String, sql: String)?
        for line in lines {
            let fields = line.split(separator: " ", maxSplits: 2).map(String.init)
            if fields.first == "ack", fields.count == 3 { acknowledged[fields[1]] = fields[2] }
            if line.hasPrefix("before "), let tab = line.firstIndex(of: "\t") {
                probe = (String(line[line.index(line.startIndex, offsetBy: 7)..<tab]), String(line[line.index(after: tab)...]))
            }
        }

        // The next start: it must open by itself, as a new user's process would.
        let store: CountdownStore
        do {
            store = try CountdownStore(path: path)
        } catch {
            verdict.failures.append("\(label): the next open failed: \(error)")
            return verdict
        }
        let probeSQL = probe?.sql
        let (integrity, probed) = try await store.grdb.read { db in
            (
                try String.fetchAll(db, sql: "PRAGMA integrity_check"),
                try probeSQL.map { try String.fetchOne(db, sql: "SELECT CAST((\($0)) AS TEXT)") ?? "NULL" }
            )
        }
        // Each item's state as every reader sees it (a countdown past its deadline is expired,
        // recorded or not), page by page: the checkpoint case writes more than one page holds.
        var rows: [String: String] = [:]
        var page = try await store.list(.all, limit: 10_000, after: nil)
        while true {
            for item in page.items { rows[item.key] = "\(item.state.rawValue) \(item.generation)" }
            guard let next = page.next else { break }
            page = try await store.list(.all, limit: 10_000, after: next)
        }
        if integrity != ["ok"] { verdict.failures.append("\(label): integrity_check says \(integrity.prefix(3))") }
        // The keys the operation in flight may have changed: those its probe names.
        let inFlightKeys = Set(probe.map { $0.sql.matches(of: /'([^']+)'/).map { String($0.1) } } ?? [])
        for (key, state) in acknowledged where !inFlightKeys.contains(key) {
            let actual = rows[key] ?? "absent"
            // A running countdown acknowledged earlier may have expired since.
            let expiredSince = state.hasPrefix("running") && actual == state.replacingOccurrences(of: "running", with: "expired")
            if actual != state, !expiredSince {
                verdict.failures.append("\(label): \(key) is \(actual), acknowledged \(state)")
            }
        }
        if let probe, let probed {
            if point == "commit.before", probed != probe.before {
                verdict.failures.append("\(label): killed before COMMIT, yet the operation is there: \(probe.before) became \(probed)")
            }
            if point == "commit.after", probed == probe.before {
                verdict.failures.append("\(label): killed after COMMIT returned, yet the operation is lost (still \(probed))")
            }
        }
        // The recovered store works: a write, a clean close, and a file sound without its WAL.
        do {
            try await store.start("after-recovery", duration: .seconds(60))
            try await store.close()
            let reader = try readOnly(path)
            let (again, found) = try await reader.read { db in
                (try String.fetchAll(db, sql: "PRAGMA integrity_check"),
                 try Int.fetchOne(db, sql: "SELECT count(*) FROM countdowns WHERE key = 'after-recovery'") ?? 0)
            }
            try reader.close()
            if again != ["ok"] || found != 1 { verdict.failures.append("\(label): after recovery, integrity \(again), write found \(found)") }
        } catch {
            verdict.failures.append("\(label): the recovered store refused a write: \(error)")
        }
        return verdict
    }

    @Test("SIGKILL at every named step of create, migrate, first clock row, each operation's commit, checkpoint and close: the next open recovers with nothing acknowledged lost")
    func killAtEveryCrashPoint() async throws {
        let folder = try TemporaryFolder()
        var failures: [String] = []
        let cases = Self.cases
        for (point, operation) in cases {
            failures += try await Self.runAndVerify(point: point, operation: operation, folder: folder).failures
        }
        for failure in failures { Issue.record(Comment(rawValue: failure)) }
        let report = "crash points: \(cases.count) points killed (\(Self.openingPoints.count) opening, \(Self.operations.count * 2) commits, \(Self.checkpointPoints.count) checkpoint, \(Self.closePoints.count) close), recovered by the next open \(cases.count - Set(failures.map { $0.prefix(while: { $0 != ":" }) }).count), failures \(failures.count)"
        print(report)
        if let file = ProcessInfo.processInfo.environment["COUNTDOWN_RELIABILITY_REPORT"] { try? (report + "\n").appendLine(to: file) }
    }
}
}
