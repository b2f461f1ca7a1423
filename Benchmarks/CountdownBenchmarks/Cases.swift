import CountdownStore
import Foundation

/// How big each benchmark is.
struct Sizes {
    var bulk: Int
    var single: Int
    var stored: Int
    var lookups: Int
    var soonest: Int
    var expiring: Int
    var opens: Int
    var latenessActive: Int
    var latenessPerSecond: Int
    var latenessSeconds: Int
    var idleSeconds: Int
    var tickKeys: Int
    var ticks: Int
    var rounds: Int
    /// Countdowns due at one instant, one mass-expiry case each.
    var mass: [Int]
    /// Countdowns that came due while nothing ran.
    var catchUp: Int
    /// Ended countdowns pruned.
    var prune: Int
    /// Countdowns coming due beside `countdown serve`'s crowd, its idle event streams and its
    /// clients that never finish a request.
    var crowdDue = 2_000
    var crowdStreams = 2_000
    var crowdSlow = 300

    static let full = Sizes(
        bulk: 100_000, single: 5_000, stored: 1_000_000, lookups: 20_000, soonest: 1_000, expiring: 10_000,
        opens: 20, latenessActive: 100_000, latenessPerSecond: 1_000, latenessSeconds: 10, idleSeconds: 30,
        tickKeys: 10_000, ticks: 20, rounds: 5, mass: [10_000, 100_000, 1_000_000], catchUp: 1_000_000, prune: 1_000_000)
    static let quick = Sizes(
        bulk: 5_000, single: 200, stored: 20_000, lookups: 2_000, soonest: 100, expiring: 1_000,
        opens: 3, latenessActive: 5_000, latenessPerSecond: 200, latenessSeconds: 2, idleSeconds: 2,
        tickKeys: 1_000, ticks: 3, rounds: 1, mass: [2_000], catchUp: 2_000, prune: 2_000,
        crowdDue: 50, crowdStreams: 50, crowdSlow: 10)
}

/// Every benchmark, each writing into its own files under `folder`.
struct Benchmarks {
    var sizes: Sizes
    let folder: URL
    let log: @Sendable (String) -> Void

    func path(_ name: String) -> String { folder.appendingPathComponent(name).path }

    /// Removes the files of earlier cases (all but the large store) and waits for the kernel to
    /// write back what they left, so that no case pays for another's writes. Only the files the
    /// cases make are removed: anything else in a folder given with `--folder` stays.
    func settle() {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        for name in names where Self.isCaseFile(name) {
            try? FileManager.default.removeItem(atPath: path(name))
        }
        sync()
    }

    /// Whether `name` is a file an earlier case made (the large store is kept for the next run).
    static func isCaseFile(_ name: String) -> Bool {
        let stores = ["bulk-", "single-", "expire-", "lateness", "ticks", "mass-", "catch-up-", "prune-", "crowd-", "curve-"]
        let logs = ["writer-", "reader-", "write-", "read-", "tool-", "run-", "crowd-"]
        let isStore = [".sqlite", ".sqlite-wal", ".sqlite-shm", ".sqlite-journal"].contains { name.hasSuffix($0) }
        if isStore { return stores.contains { name.hasPrefix($0) } }
        return name.hasSuffix(".log") && logs.contains { name.hasPrefix($0) }
    }

    /// A new store file with the schema in place, closed: raw benchmarks write into such files
    /// too, so both sides work on the same schema.
    func emptyStore(_ name: String) async throws -> String {
        let file = path(name)
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: file + suffix) }
        let store = try CountdownStore(path: file)
        try await store.close()
        return file
    }

    static let hour: Int64 = 3_600_000

    // MARK: - Writes

    func bulkStart() async throws -> Figure {
        let count = sizes.bulk
        let requests = (0..<count).map { index in
            CountdownRequest.countdown("bulk-\(index)", duration: .milliseconds(Self.hour + Int64(index)), group: "g\(index % 16)")
        }
        var round = 0
        let (ours, raw) = try await alternating(rounds: sizes.rounds) {
            round += 1
            let store = try CountdownStore(path: try await emptyStore("bulk-ours-\(round).sqlite"))
            let seconds = try await timed { try await store.start(requests) }
            try await store.close()
            return Double(count) / seconds
        } raw: {
            let db = try RawDatabase(path: try await emptyStore("bulk-raw-\(round).sqlite"))
            let now = Date().millisecondsSince1970
            return Double(count) / (try await timed { try Raw.bulkInsert(db, prefix: "bulk-", count: count, groups: 16, nowMs: now) })
        }
        return Figure(name: "bulk start, one call", n: count, ours: ours, raw: raw, unit: "rows/s", target: .atLeastRatio(0.7))
    }

    /// Starts one at a time, each its own transaction, under `durability`: `.full` syncs every
    /// commit to the disk, so it runs a tenth of the commits.
    func singleStart(durability: CountdownStore.Durability = .normal) async throws -> Figure {
        let count = durability == .full ? max(20, sizes.single / 10) : sizes.single
        let tag = durability == .full ? "full" : "normal"
        var round = 0
        // Commit rates swing with the WAL checkpoints that land in a round: more rounds than elsewhere.
        let (ours, raw) = try await alternating(rounds: sizes.rounds * 2 - 1) {
            round += 1
            let store = try CountdownStore(
                path: try await emptyStore("single-\(tag)-ours-\(round).sqlite"), configuration: .init(durability: durability))
            let seconds = try await timed {
                for index in 0..<count {
                    try await store.start("one-\(index)", duration: .milliseconds(Self.hour + Int64(index)), group: "g\(index % 16)")
                }
            }
            try await store.close()
            return Double(count) / seconds
        } raw: {
            let db = try RawDatabase(path: try await emptyStore("single-\(tag)-raw-\(round).sqlite"), fullSync: durability == .full)
            let now = Date().millisecondsSince1970
            return Double(count) / (try await timed { try Raw.singleInserts(db, prefix: "one-", count: count, groups: 16, nowMs: now) })
        }
        return Figure(
            name: durability == .full ? "single start, durability full (a sync per commit)" : "single start, one transaction each",
            n: count, ours: ours, raw: raw, unit: "commits/s", target: .atLeastRatio(0.8))
    }

    // MARK: - The large store

    /// A store of `sizes.stored` items: 85 % running wall countdowns, 10 % running active ones,
    /// 5 % paused; deadlines spread from 2 hours to 30 days ahead, in 50 groups.
    ///
    /// With `reuse`, a store left by an earlier run is used again while none of its countdowns
    /// has reached zero or will within the hour: the cases count on it holding nothing due.
    func largeStore(reuse: Bool) async throws -> String {
        let count = sizes.stored
        let name = "large-\(count).sqlite"
        if reuse, FileManager.default.fileExists(atPath: path(name)) {
            if try await holdsNothingDueSoon(path(name)) {
                log("  reusing \(path(name))")
                return path(name)
            }
            log("  \(path(name)) holds countdowns due within the hour: building it again")
        }
        let file = try await emptyStore(name)
        let store = try CountdownStore(path: file)
        var paused: [String] = []
        for chunkStart in stride(from: 0, to: count, by: 100_000) {
            let requests = (chunkStart..<min(count, chunkStart + 100_000)).map { index in
                let key = String(format: "item-%07d", index)
                if index % 20 == 7 { paused.append(key) }
                let duration = 2 * Self.hour + Int64(index) * 7919 % (30 * 24 * Self.hour)
                return CountdownRequest.countdown(
                    key, duration: .milliseconds(duration), group: "g\(index % 50)",
                    policy: index % 10 == 3 ? .active : .wall)
            }
            try await store.start(requests)
        }
        for key in paused { try await store.pause(key) }
        try await store.close()
        return file
    }

    /// Whether no countdown of the store at `file` has reached zero, nor will within the hour.
    private func holdsNothingDueSoon(_ file: String) async throws -> Bool {
        let store = try CountdownStore(path: file)
        let due = try await store.expired(limit: 1)
        let soon = try await store.expiring(within: .seconds(3600), limit: 1)
        try await store.close()
        return due.isEmpty && soon.isEmpty
    }

    func nextDeadline(_ file: String) async throws -> Figure {
        let store = try CountdownStore(path: file)
        let db = try RawDatabase(path: file)
        let lookup = try Raw.NextDeadline(db)
        let now = try await store.now()
        let count = sizes.lookups
        let (ours, raw) = try await alternating(rounds: sizes.rounds * 2 + 1) {
            try await timed {
                for _ in 0..<count { _ = try await store.nextDeadline() }
            } / Double(count)
        } raw: {
            try await timed {
                for _ in 0..<count { _ = try lookup(wallTimeline: now.active + now.gap, activeTimeline: now.active) }
            } / Double(count)
        }
        try await store.close()
        return Figure(
            name: "next-deadline lookup", n: sizes.stored, ours: ours * 1e6, raw: raw * 1e6, unit: "µs",
            target: .atMostRatio(3))
    }

    func soonest(_ file: String) async throws -> Figure {
        let store = try CountdownStore(path: file)
        let db = try RawDatabase(path: file)
        let query = try Raw.Soonest(db)
        let now = try await store.now()
        let count = sizes.soonest
        let (ours, raw) = try await alternating(rounds: sizes.rounds * 2 + 1) {
            try await timed {
                for _ in 0..<count {
                    let page = try await store.active(limit: 100)
                    precondition(page.items.count == 100)
                }
            } / Double(count)
        } raw: {
            try await timed {
                for _ in 0..<count {
                    let rows = try query(limit: 100, wallTimeline: now.active + now.gap, activeTimeline: now.active)
                    precondition(rows.count == 100)
                }
            } / Double(count)
        }
        try await store.close()
        return Figure(
            name: "100 soonest active with remaining", n: sizes.stored, ours: ours * 1e6, raw: raw * 1e6, unit: "µs",
            target: .atMostRatio(1.5))
    }

    /// Copies of the large store with `sizes.expiring` countdowns already due; ours expires them
    /// with `expireDue`, raw with one UPDATE and one INSERT per item.
    func expiring(_ file: String) async throws -> Figure {
        let count = sizes.expiring
        var round = 0
        func dueCopy(_ name: String) async throws -> String {
            let copy = path(name)
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: copy + suffix) }
            try FileManager.default.copyItem(atPath: file, toPath: copy)
            let store = try CountdownStore(path: copy)
            try await store.start((0..<count).map { .countdown("due-\($0)", duration: .milliseconds(1), group: "g\($0 % 50)") })
            try await store.close()
            return copy
        }
        let (ours, raw) = try await alternating(rounds: max(1, sizes.rounds - 1)) {
            round += 1
            let store = try CountdownStore(path: try await dueCopy("expire-ours-\(round).sqlite"))
            var expired = 0
            let seconds = try await timed { expired = try await store.expireDue().count }
            precondition(expired == count, "expired \(expired) of \(count)")
            try await store.close()
            return Double(count) / seconds
        } raw: {
            let copy = try await dueCopy("expire-raw-\(round).sqlite")
            let db = try RawDatabase(path: copy)
            let bound = try db.prepare("SELECT max(deadline_ms) FROM countdowns WHERE key LIKE 'due-%'")
            _ = try bound.step()
            let timeline = bound.int(0)
            let now = Date().millisecondsSince1970
            var expired = 0
            let seconds = try await timed { expired = try Raw.expireDue(db, timeline: timeline, nowMs: now, limit: count) }
            precondition(expired == count, "raw expired \(expired) of \(count)")
            return Double(count) / seconds
        }
        return Figure(
            name: "expiring due items (state and events)", n: count, ours: ours, raw: raw, unit: "rows/s",
            target: .atLeastRatio(0.5))
    }

    func openToReady(_ file: String) async throws -> Figure {
        let (ours, raw) = try await alternating(rounds: sizes.opens) {
            var store: CountdownStore?
            let seconds = try await timed { store = try CountdownStore(path: file) }
            try await store?.close()
            return seconds
        } raw: {
            try await timed {
                let db = try RawDatabase(path: file)
                let migrations = try db.prepare("SELECT name FROM countdown_migrations ORDER BY rowid")
                while try migrations.step() {}
                let clock = try db.prepare("SELECT * FROM countdown_clock WHERE id = 1")
                _ = try clock.step()
            }
        }
        return Figure(name: "open to ready", n: sizes.stored, ours: ours * 1e3, raw: raw * 1e3, unit: "ms", target: .atMost(5))
    }
}
