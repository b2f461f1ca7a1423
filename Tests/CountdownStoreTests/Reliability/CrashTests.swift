import Foundation
import GRDB
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

/// Crash: a worker applies random operations and acknowledges each commit; it is killed with
/// SIGKILL at random instants. No acknowledged operation may be lost, the file must stay sound,
/// and every expiry must reach the named consumer at least once, never early, never stale.
///
/// Size: `COUNTDOWN_CRASH_CYCLES` (100 in CI).
extension RealProcesses {
@Suite("Crash", .enabled(if: FileManager.default.isExecutableFile(atPath: tortureHelper.path)))
struct CrashTests {
    /// What the last acknowledged operation says a key holds.
    enum Expected: Equatable {
        case absent
        case item(state: String, generation: Int64, duration: String, kind: String, payload: String)
    }

    static func parse(ackTail tail: [Substring]) -> Expected? {
        if tail.first == "refused" { return nil }
        if tail.first == "removed" { return .absent }
        guard tail.count == 5, let generation = Int64(tail[1]) else { return nil }
        return .item(state: String(tail[0]), generation: generation, duration: String(tail[2]), kind: String(tail[3]), payload: String(tail[4]))
    }

    /// The rows as the model describes them.
    static func stored(_ db: Database) throws -> [String: Expected] {
        var rows: [String: Expected] = [:]
        // The state as every reader sees it (the view computes it): a countdown restarted or
        // shortened with nothing left is expired at once, before a later write records it.
        let sql = """
            SELECT c.key, f.state, c.generation, c.duration_ms, c.kind, c.payload
            FROM countdowns AS c JOIN countdown_figures AS f ON f.key = c.key
            """
        for row in try Row.fetchAll(db, sql: sql) {
            let duration: Int64? = row["duration_ms"]
            rows[row["key"]] = .item(
                state: row["state"], generation: row["generation"], duration: duration.map(String.init) ?? "-",
                kind: row["kind"], payload: (row["payload"] as String?) ?? "-")
        }
        return rows
    }

    /// Whether `actual` is what `expected` allows: a running countdown may have expired since.
    static func consistent(_ actual: Expected, with expected: Expected) -> Bool {
        guard case .item(let state, let generation, let duration, let kind, let payload) = expected else { return actual == .absent }
        guard case .item(let actualState, let actualGeneration, let actualDuration, let actualKind, let actualPayload) = actual else { return false }
        guard generation == actualGeneration, kind == actualKind, payload == actualPayload else { return false }
        if state == "running", kind == "countdown", actualState == "expired" { return true }
        return state == actualState && duration == actualDuration
    }

    @Test("SIGKILL in the middle of group commits: no acknowledged start or pause lost, none applied twice, nothing half applied")
    func killDuringGroupCommits() async throws {
        let cycles = suiteSize("COUNTDOWN_GROUP_CRASH_CYCLES", ci: 12)
        let folder = try TemporaryFolder()
        let path = folder.path()
        var started = Set<String>()
        var paused = Set<String>()
        var largest = 0
        for cycle in 0..<cycles {
            let worker = try HelperProcess(["groupcrash", path, "c\(cycle)"])
            try await Task.sleep(for: .milliseconds(Int.random(in: 300...900)))
            worker.kill()
            for line in await worker.finish() {
                let fields = line.split(separator: " ")
                guard fields.count == 2 else { continue }
                switch fields[0] {
                case "ack": started.insert(String(fields[1]))
                case "paused": paused.insert(String(fields[1]))
                case "largest": largest = max(largest, Int(fields[1]) ?? 0)
                default: break
                }
            }
        }
        let queue = try DatabaseQueue(path: path)
        let (items, events, integrity) = try await queue.read { db in
            (
                Dictionary(
                    uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT key, state, generation, payload FROM countdowns").map {
                        ($0["key"] as String, (state: $0["state"] as String, generation: $0["generation"] as Int64, payload: $0["payload"] as String?))
                    }),
                try Row.fetchAll(db, sql: "SELECT key, kind FROM countdown_events WHERE key IS NOT NULL").map {
                    (key: $0["key"] as String, kind: $0["kind"] as String)
                },
                try String.fetchAll(db, sql: "PRAGMA integrity_check")
            )
        }
        try queue.close()
        #expect(integrity == ["ok"])
        var lost = 0
        for key in started where items[key] == nil {
            lost += 1
            Issue.record("acknowledged start of \(key) lost")
        }
        for key in paused where items[key]?.state != "paused" {
            lost += 1
            Issue.record("acknowledged pause of \(key) lost: \(items[key].map { $0.state } ?? "no item")")
        }
        var eventsByKey: [String: [String]] = [:]
        for event in events { eventsByKey[event.key, default: []].append(event.kind) }
        for (key, item) in items {
            // Started once, in generation 1, with its own payload: nothing applied twice or mixed up.
            let index = key.split(separator: "-").last.map(String.init) ?? ""
            #expect(item.generation == 1 && item.payload == "p\(index)", "\(key): \(item)")
            let kinds = eventsByKey[key] ?? []
            #expect(kinds.filter { $0 == "started" }.count == 1, "\(key): \(kinds)")
            // A pause is all there (the item paused and its event) or not at all.
            #expect((item.state == "paused") == kinds.contains("paused"), "\(key): \(item.state), \(kinds)")
        }
        for key in eventsByKey.keys where items[key] == nil { Issue.record("events of \(key), which was never stored") }
        print(
            "group crash suite: \(cycles) kills, \(started.count) starts and \(paused.count) pauses acknowledged, lost \(lost), "
                + "\(items.count) stored (\(items.count - started.count) committed but not acknowledged before a kill), largest group \(largest)")
        #expect(started.count > cycles, "the workers got work done")
        #expect(largest > 1, "the writes were grouped")
    }

    @Test("SIGKILL at random instants loses no acknowledged operation; every expiry is delivered, never early, never stale")
    func killAtRandomInstants() async throws {
        let cycles = suiteSize("COUNTDOWN_CRASH_CYCLES", ci: 100)
        let seed = UInt64(ProcessInfo.processInfo.environment["COUNTDOWN_CRASH_SEED"] ?? "") ?? UInt64.random(in: 1...UInt64.max / 2)
        var rng = SeededGenerator(state: seed)
        let folder = try TemporaryFolder()
        let path = folder.path()
        var model: [String: Expected] = [:]
        var delivered: [Int64: Int] = [:]
        var acknowledged = 0
        var resolvedInFlight = 0
        var checkpoints = 0
        var killedMidCheckpoint = 0

        for cycle in 0..<cycles {
            let worker = try HelperProcess(["crash", path, String(seed &+ UInt64(cycle))])
            try await Task.sleep(for: .milliseconds(Int.random(in: 40...400, using: &rng)))
            worker.kill()
            var inFlight: String?
            var checkpointing = false
            for line in await worker.finish() {
                let fields = line.split(separator: " ")
                switch fields.first {
                case "checkpoint":
                    checkpointing = fields.last == "begin"
                    if !checkpointing { checkpoints += 1 }
                case "begin": inFlight = String(fields[2])
                case "ack":
                    let key = String(fields[2])
                    if let expected = Self.parse(ackTail: Array(fields.dropFirst(3))) { model[key] = expected }
                    acknowledged += 1
                    inFlight = nil
                case "delivered": delivered[Int64(fields[1])!, default: 0] += 1
                default: break
                }
            }
            if checkpointing { killedMidCheckpoint += 1 }
            // The next cycle's worker opens what this kill left, as the next start would: a worker
            // that cannot (it exits with status 70) fails the suite with its stderr.
            // A worker killed before it created the store (its start took longer than the delay,
            // on a loaded machine) leaves no file, an empty one, or one whose migrations stopped
            // part way (each commits on its own): nothing can have been acknowledged.
            guard FileManager.default.fileExists(atPath: path) else {
                #expect(acknowledged == 0, "cycle \(cycle), seed \(seed): the store is gone")
                continue
            }
            let queue = try readOnly(path)
            let (integrity, rows, created) = try await queue.read { db in
                // Created: every migration this build knows is recorded (the views read below are
                // those of the last one).
                let created =
                    try db.tableExists(SQLiteMigrator.tableName)
                    && String.fetchSet(db, sql: "SELECT name FROM \(SQLiteMigrator.tableName)")
                        .isSuperset(of: Migration.embedded.map(\.name))
                return (try String.fetchAll(db, sql: "PRAGMA integrity_check"), created ? try Self.stored(db) : [:], created)
            }
            try queue.close()
            if !created {
                #expect(acknowledged == 0, "cycle \(cycle), seed \(seed): the store lost its tables or migrations")
            }
            #expect(integrity == ["ok"], "cycle \(cycle), seed \(seed)")
            for (key, expected) in model where key != inFlight {
                let actual = rows[key] ?? .absent
                #expect(Self.consistent(actual, with: expected), "cycle \(cycle), seed \(seed): \(key) is \(actual), acknowledged \(expected)")
            }
            for key in rows.keys where model[key] == nil && key != inFlight {
                Issue.record("cycle \(cycle), seed \(seed): \(key) exists but no acknowledged operation made it")
            }
            if let inFlight {
                // The operation in flight at the kill either committed or did not: the file decides.
                model[inFlight] = rows[inFlight] ?? .absent
                resolvedInFlight += 1
            }
        }

        // Let everything due expire and every pending expiry reach the consumer.
        let drain = try HelperProcess(["drain", path])
        // The last event the drain saw delivered up to; closing the store may record more.
        var drained: Int64?
        for line in try await drain.waitForExit(seconds: 60) {
            let fields = line.split(separator: " ")
            if fields.first == "delivered" { delivered[Int64(fields[1])!, default: 0] += 1 }
            if fields.first == "drained", fields.count == 2 { drained = Int64(fields[1]) }
        }
        let drainedThrough = try #require(drained, "the drain reported how far it delivered")
        struct Expiry { var id: Int64; var key: String; var generation: Int64; var late: Int64; var deadline: Int64; var fired: Int64 }
        let queue = try readOnly(path)
        let (expiries, generations, currentGenerations, integrity) = try await queue.read { db in
            (
                try Row.fetchAll(db, sql: "SELECT * FROM countdown_events WHERE kind = 'expired' ORDER BY id").map {
                    Expiry(id: $0["id"], key: $0["key"], generation: $0["generation"], late: $0["late_ms"],
                           deadline: $0["deadline_at_ms"], fired: $0["fired_at_ms"])
                },
                try Row.fetchAll(db, sql: "SELECT id, kind, key, generation FROM countdown_events WHERE key IS NOT NULL ORDER BY id")
                    .map { (id: $0["id"] as Int64, kind: $0["kind"] as String, key: $0["key"] as String, generation: $0["generation"] as Int64?) },
                // The key's latest generation, alive or retired by a removal.
                Dictionary(
                    try Row.fetchAll(
                        db, sql: "SELECT key, generation FROM countdowns UNION ALL SELECT key, generation FROM countdown_retired_keys"
                    ).map { ($0["key"] as String, $0["generation"] as Int64) },
                    uniquingKeysWith: { max($0, $1) }),
                try String.fetchAll(db, sql: "PRAGMA integrity_check")
            )
        }
        try queue.close()
        #expect(integrity == ["ok"])
        // Never early.
        for expiry in expiries {
            #expect(expiry.late >= 0 && expiry.fired >= expiry.deadline, "expiry \(expiry.id) of \(expiry.key) was early")
        }
        // Every expiry of a current generation was delivered at least once.
        var undelivered = 0
        for expiry in expiries where delivered[expiry.id] == nil && expiry.id <= drainedThrough {
            let current = currentGenerations[expiry.key]
            if current == nil || current! <= expiry.generation {
                undelivered += 1
                let history = generations.filter { $0.key == expiry.key }.map { "\($0.id):\($0.kind):\($0.generation ?? 0)" }
                Issue.record("expiry \(expiry.id) of \(expiry.key) generation \(expiry.generation) was never delivered (seed \(seed)); history \(history)")
            }
        }
        // No expiry was recorded for a generation older than the key's generation at that moment.
        var generationNow: [String: Int64] = [:]
        for event in generations {
            guard let generation = event.generation else { continue }
            if event.kind == "expired" {
                #expect(generationNow[event.key] == generation, "expiry \(event.id) of \(event.key) names generation \(generation), current \(generationNow[event.key] ?? -1)")
            } else if event.kind != "removed" {
                generationNow[event.key] = generation
            }
        }
        let duplicates = delivered.values.filter { $0 > 1 }.count
        let report = """
            crash suite: seed \(seed), \(cycles) cycles, \(cycles) kills (\(killedMidCheckpoint) in a WAL checkpoint; \(checkpoints) \
            checkpoints completed), \(acknowledged) acknowledged operations verified \
            (\(resolvedInFlight) in flight at a kill), lost 0, \(expiries.count) expiries, \(delivered.count) delivered, \
            \(duplicates) delivered more than once, undelivered \(undelivered) (\(expiries.filter { $0.id > drainedThrough }.count) recorded as the drain closed, after its last read), integrity ok
            """
        print(report)
        if let file = ProcessInfo.processInfo.environment["COUNTDOWN_RELIABILITY_REPORT"] {
            try? (report + "\n").appendLine(to: file)
        }
        #expect(acknowledged > cycles, "the workers got work done")
        #expect(!expiries.isEmpty, "expiries happened during the cycles")
    }
}

}

extension String {
    /// Appends this text to the file at `path`, creating it when missing.
    func appendLine(to path: String) throws {
        if let handle = FileHandle(forWritingAtPath: path) {
            defer { try? handle.close() }
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(utf8))
        } else {
            try write(toFile: path, atomically: true, encoding: .utf8)
        }
    }
}
