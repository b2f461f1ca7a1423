import CountdownStore
import Foundation

/// Many tasks starting countdowns one call each, as a web server's request handlers do: ours
/// (group commit) beside raw SQLite doing one transaction per call on one connection, its calls
/// taking turns as the store's did before.
extension Benchmarks {
    /// The task counts measured.
    static let taskCounts = [1, 4, 16, 64]

    /// How many starts the task cases make: `sizes.single`, half as many with `.full` (enough
    /// groups of 64 that the first ones do not set the figure).
    func concurrentCount(_ durability: CountdownStore.Durability) -> Int {
        durability == .full ? max(40, sizes.single / 2) : sizes.single
    }

    /// Ours: `tasks` tasks start `count` countdowns in a new store named `file`, one `start` call
    /// each; returns the starts per second.
    private func startsInTasks(_ tasks: Int, count: Int, durability: CountdownStore.Durability, file: String) async throws -> Double {
        let store = try CountdownStore(
            path: try await emptyStore(file), configuration: .init(durability: durability))
        let seconds = try await timed {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<tasks {
                    group.addTask {
                        for index in stride(from: task, to: count, by: tasks) {
                            try await store.start("many-\(index)", duration: .milliseconds(Self.hour + Int64(index)), group: "g\(index % 16)")
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        try await store.close()
        return Double(count) / seconds
    }

    /// `tasks` tasks, ``concurrentCount(_:)`` calls in all, each `start` one call.
    func concurrentStarts(tasks: Int, durability: CountdownStore.Durability) async throws -> Figure {
        let count = concurrentCount(durability)
        let tag = durability == .full ? "full" : "normal"
        var round = 0
        // A round of ours lasts a few tens of milliseconds, and rounds of the same binary swing
        // by a fifth on a small machine: more rounds than elsewhere, as for the single start.
        let (ours, raw) = try await alternating(rounds: sizes.rounds * 2 + 1) {
            round += 1
            return try await startsInTasks(tasks, count: count, durability: durability, file: "single-tasks\(tasks)-\(tag)-ours-\(round).sqlite")
        } raw: {
            let db = try RawSerialDatabase(
                try RawDatabase(path: try await emptyStore("single-tasks\(tasks)-\(tag)-raw-\(round).sqlite"), fullSync: durability == .full))
            let now = Date().millisecondsSince1970
            return Double(count)
                / (try await timed {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for task in 0..<tasks {
                            group.addTask {
                                for index in stride(from: task, to: count, by: tasks) { try await db.start(index: index, nowMs: now) }
                            }
                        }
                        try await group.waitForAll()
                    }
                })
        }
        let target: Target =
            switch tasks {
            case 1: .atLeastRatio(0.8)
            case 64: .atLeastRatio(durability == .full ? 10 : 5)
            default: .unjudged
            }
        return Figure(
            name: "\(tasks) tasks starting one call each, durability \(tag)", n: count, ours: ours, raw: raw, unit: "starts/s",
            target: target)
    }

    /// The most any grouping of `tasks` callers can reach: raw SQLite inserting the same
    /// countdowns in transactions of `tasks` each, one after another, with no task between. Ours
    /// (`tasks` tasks, one call each) beside it says what grouping costs over the engine's own work.
    func groupedCeiling(tasks: Int, durability: CountdownStore.Durability) async throws -> Figure {
        let count = concurrentCount(durability)
        let tag = durability == .full ? "full" : "normal"
        var round = 0
        let (ours, raw) = try await alternating(rounds: sizes.rounds * 2 + 1) {
            round += 1
            return try await startsInTasks(tasks, count: count, durability: durability, file: "ceiling-\(tag)-ours-\(round).sqlite")
        } raw: {
            let db = try RawDatabase(path: try await emptyStore("ceiling-\(tag)-raw-\(round).sqlite"), fullSync: durability == .full)
            let now = Date().millisecondsSince1970
            return Double(count) / (try await timed { try Raw.batchedInserts(db, prefix: "many-", count: count, batch: tasks, groups: 16, nowMs: now) })
        }
        return Figure(
            name: "\(tasks) tasks, one call each, beside raw in transactions of \(tasks), durability \(tag)", n: count, ours: ours,
            raw: raw, unit: "starts/s", target: .unjudged)
    }

    /// A lone caller's `start`, one after another: its latency at the median and the 99th
    /// percentile, beside raw's one transaction per call.
    func loneLatency() async throws -> [Figure] {
        let count = sizes.single
        let store = try CountdownStore(path: try await emptyStore("single-lone-ours.sqlite"))
        var ours: [Double] = []
        ours.reserveCapacity(count)
        for index in 0..<count {
            let start = ContinuousClock.now
            try await store.start("lone-\(index)", duration: .milliseconds(Self.hour + Int64(index)), group: "g\(index % 16)")
            ours.append((ContinuousClock.now - start).seconds * 1e3)
        }
        try await store.close()
        let db = try RawSerialDatabase(try RawDatabase(path: try await emptyStore("single-lone-raw.sqlite")))
        let now = Date().millisecondsSince1970
        var raw: [Double] = []
        raw.reserveCapacity(count)
        for index in 0..<count {
            let start = ContinuousClock.now
            try await db.start(index: index, nowMs: now)
            raw.append((ContinuousClock.now - start).seconds * 1e3)
        }
        ours.sort()
        raw.sort()
        return [
            Figure(
                name: "a lone caller's start, p50", n: count, ours: percentile(ours, 0.5), raw: percentile(raw, 0.5), unit: "ms",
                target: .unjudged),
            Figure(
                name: "a lone caller's start, p99", n: count, ours: percentile(ours, 0.99), raw: percentile(raw, 0.99), unit: "ms",
                target: .unjudged),
        ]
    }
}

/// Raw SQLite for many tasks: one connection, one transaction per call, the calls taking turns
/// on a serial queue (what a host without group commit does).
final class RawSerialDatabase: @unchecked Sendable {
    // `@unchecked Sendable`: the connection and its statements are used on `queue` only.
    private let db: RawDatabase
    private let queue = DispatchQueue(label: "raw-serial")
    private let item: RawStatement
    private let event: RawStatement
    private let begin: RawStatement
    private let commit: RawStatement

    init(_ db: RawDatabase) throws {
        self.db = db
        item = try db.prepare(Raw.insertItem)
        event = try db.prepare(Raw.insertStartEvent)
        begin = try db.prepare("BEGIN IMMEDIATE")
        commit = try db.prepare("COMMIT")
    }

    /// Inserts countdown `many-INDEX` and its start event in a transaction of its own.
    func start(index: Int, nowMs: Int64) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            queue.async {
                continuation.resume(with: Result {
                    let duration = Int64(3_600_000 + index)
                    let (key, group) = ("many-\(index)", "g\(index % 16)")
                    try self.begin.bind([]).run()
                    do {
                        try self.item.bind([.text(key), .text(group), .int(duration), .int(nowMs)]).run()
                        try self.event.bind([.text(key), .text(group), .int(nowMs), .text("{\"duration_ms\":\(duration)}")]).run()
                        try self.commit.bind([]).run()
                    } catch {
                        try? self.db.execute("ROLLBACK")
                        throw error
                    }
                })
            }
        }
    }
}
