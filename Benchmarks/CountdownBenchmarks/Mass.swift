import CountdownStore
import Foundation

/// What the mass cases share beside their sizes.
struct MassSettings: Sendable {
    /// Rows per transaction on the raw side.
    var batch: Int
    /// The `countdown` tool of the same build.
    var tool: String
    /// How long `countdown run` may take to deliver every expiry, after the instant (or its
    /// start); nil: 120 s plus the place's allowance per countdown.
    var timeout: Duration?
    /// Where the children's stderr goes.
    var folder: URL

    func timeout(for count: Int, at place: MassPlace) -> Duration { timeout ?? .seconds(120) + place.perCountdown * count }

    /// The `countdown` executable beside this one, or an error saying how to build it.
    static func tool() throws -> String {
        let path = URL(fileURLWithPath: benchmarkExecutable()).deletingLastPathComponent().appendingPathComponent("countdown").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw BenchmarkError("no countdown tool at \(path): build it beside the benchmark (swift build -c release --product countdown)")
        }
        return path
    }
}

/// Where one mass case's store lives, as the library, the tool and the helpers reach it.
struct MassPlace {
    /// `--db` for the tool and the helpers: a file or a `postgres://` URL.
    var db: String
    /// Opens the store.
    var open: () async throws -> CountdownStore
    /// The lease's holder, if any: `countdown run` is ready once it holds the lease.
    var leaseHolder: () async throws -> String?
    /// How long `countdown run` may take per countdown, beyond 120 s, unless `--mass-timeout` says.
    var perCountdown: Duration = .milliseconds(1)
}

/// What a real `countdown run --consumer sale` delivered, and what the processes beside it saw.
/// `countdown prune` of the drained countdowns beside `countdown run` and the other processes.
struct PrunePhase {
    var seconds: Double
    var succeeded: Bool
    var beside: BesideSummary
}

struct MassRun {
    var count: Int
    /// How many of the `count` keys were read (each once or more).
    var delivered: Int
    /// The first line read, after the instant (catch-up: after `countdown run` was started);
    /// infinite when none was.
    var firstMs: Double
    /// The `late_ms` of that line.
    var firstLateMs: Double?
    /// The line that completed the `count` keys, after the same origin; infinite when they
    /// were not all read.
    var allSeconds: Double
    /// Lines per second from the first line to the one that completed the keys (NaN when they
    /// were not all read).
    var perSecond: Double
    var duplicates: Int
    var beside: BesideSummary
    /// `countdown run`'s peak resident memory, read just before it was stopped (or ended).
    var peakMiB: Double?
    /// What went wrong with `countdown run` (it ended early, delivered too little in time, or
    /// did not stop as asked), if anything.
    var runProblems: [String]
    /// The prune phase after the drain, when it ran.
    var prune: PrunePhase? = nil

    var failures: Int { beside.failures + runProblems.count }
}

/// Work timed in this process (the raw side of a mass case, or ours pruning), the same helpers beside it.
struct TimedRun {
    var count: Int
    /// The first transaction's commit, after the work began (the end, when it does not say).
    var firstMs: Double
    var seconds: Double
    var beside: BesideSummary

    var perSecond: Double { Double(count) / seconds }
    var failures: Int { beside.failures }
}

/// Tallies `countdown run`'s expiry lines as they are read, on the reading thread: which of the
/// keys `sale-0` … `sale-(expected-1)` arrived, when the first line and the one that completed
/// them were read.
final class ExpiryTally: @unchecked Sendable {
    // `@unchecked Sendable`: every property but the constants is read and written under `lock` only.
    private let lock = NSLock()
    private let expected: Int
    private let marker = Array("\"key\":\"sale-".utf8)
    private var seen: [Bool]
    private var partial: [UInt8] = []
    private var state = Snapshot()

    struct Snapshot {
        var lines = 0
        var distinct = 0
        var duplicates = 0
        var others = 0
        var otherSample: String?
        var first: ContinuousClock.Instant?
        var firstLine: String?
        var complete: ContinuousClock.Instant?
        var ended = false
    }

    init(expected: Int) {
        self.expected = expected
        seen = [Bool](repeating: false, count: expected)
    }

    func consume(_ bytes: ArraySlice<UInt8>, _ at: ContinuousClock.Instant) {
        lock.withLock {
            if bytes.isEmpty { state.ended = true }
            partial += bytes
            var start = partial.startIndex
            while let newline = partial[start...].firstIndex(of: UInt8(ascii: "\n")) {
                line(partial[start..<newline], at)
                start = newline + 1
            }
            partial.removeSubrange(..<start)
        }
    }

    private func line(_ line: ArraySlice<UInt8>, _ at: ContinuousClock.Instant) {
        state.lines += 1
        if state.first == nil {
            state.first = at
            state.firstLine = String(decoding: line, as: UTF8.self)
        }
        guard let index = saleIndex(line), index < expected else {
            state.others += 1
            if state.otherSample == nil { state.otherSample = String(decoding: line.prefix(300), as: UTF8.self) }
            return
        }
        if seen[index] {
            state.duplicates += 1
            return
        }
        seen[index] = true
        state.distinct += 1
        if state.distinct == expected { state.complete = at }
    }

    /// The number after `"key":"sale-` in `line`.
    private func saleIndex(_ line: ArraySlice<UInt8>) -> Int? {
        let bytes = Array(line.prefix(200))
        guard bytes.count >= marker.count else { return nil }
        for offset in 0...(bytes.count - marker.count) where bytes[offset] == marker[0] {
            guard bytes[offset..<offset + marker.count].elementsEqual(marker) else { continue }
            var value = 0
            var digits = 0
            for byte in bytes[(offset + marker.count)...] {
                guard byte >= 48, byte <= 57 else { return digits > 0 && byte == UInt8(ascii: "\"") ? value : nil }
                value = value * 10 + Int(byte - 48)
                digits += 1
            }
            return nil
        }
        return nil
    }

    var snapshot: Snapshot { lock.withLock { state } }

    /// Waits until every key arrived, the output ended or `deadline` passed, calling `meanwhile`
    /// about every 100 ms.
    func wait(until deadline: ContinuousClock.Instant, meanwhile: () -> Void) async -> Snapshot {
        var next = ContinuousClock.now
        while true {
            if ContinuousClock.now >= next {
                meanwhile()
                next = .now + .milliseconds(100)
            }
            let now = snapshot
            if now.complete != nil || now.ended || ContinuousClock.now >= deadline { return now }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }
}

/// The mass cases' steps, whatever the engine.
enum Mass {
    /// Keys start `sale-`; the consumer is `sale`.
    static let keyPrefix = "sale-"
    /// How many countdowns each `start([CountdownRequest])` call starts.
    static let perCall = 20_000

    /// Starts `count` countdowns `sale-0` … in `store`, `perCall` per call, all reaching zero at
    /// one instant: `instant` for the first call, then the first call's deadline. A call's
    /// countdowns count from the store's clock reading inside the call, which comes some
    /// milliseconds after the duration is chosen (20,000 requests are checked first, and a
    /// checkpoint may be under way), so each duration is shortened by the lag the call before
    /// showed. Returns the earliest and latest deadline as instants of the continuous clock.
    static func startDue(
        _ store: CountdownStore, count: Int, instant: ContinuousClock.Instant
    ) async throws -> (earliest: ContinuousClock.Instant, latest: ContinuousClock.Instant) {
        // The store's wall clock against the continuous clock: one reading between two instants.
        func wallNow() async throws -> (wall: Int64, at: ContinuousClock.Instant) {
            let before = ContinuousClock.now
            let wall = try await store.now().wall
            let after = ContinuousClock.now
            return (wall, before + (after - before) / 2)
        }
        let origin = try await wallNow()
        func wall(at instant: ContinuousClock.Instant) -> Int64 { origin.wall + Int64(((instant - origin.at).seconds * 1e3).rounded()) }
        var target = wall(at: instant)
        var lag: Int64 = 0
        var earliest = Int64.max
        var latest = Int64.min
        for start in stride(from: 0, to: count, by: perCall) {
            let expected = wall(at: .now)
            let ms = max(1, target - expected - lag)
            let started = try await store.start(
                (start..<min(count, start + perCall)).map { .countdown("\(keyPrefix)\($0)", duration: .milliseconds(ms), group: "sale") })
            var deadlines = (low: Int64.max, high: Int64.min)
            for countdown in started {
                guard let deadline = countdown.deadlineAt?.millisecondsSince1970 else { continue }
                deadlines = (min(deadlines.low, deadline), max(deadlines.high, deadline))
            }
            guard deadlines.low <= deadlines.high else { throw BenchmarkError("the countdowns started have no deadline") }
            if start == 0 { target = deadlines.low }
            lag = max(0, deadlines.low - ms - expected)
            earliest = min(earliest, deadlines.low)
            latest = max(latest, deadlines.high)
        }
        let end = try await wallNow()
        return (end.at + .milliseconds(earliest - end.wall), end.at + .milliseconds(latest - end.wall))
    }

    /// Throws unless the countdowns are still to come due: the last writes of the setting up
    /// (every write records the expiries that are due) must come before them.
    static func ahead(of earliest: ContinuousClock.Instant) throws {
        guard ContinuousClock.now < earliest else {
            throw BenchmarkError("starting the countdowns took longer than planned: they came due before the setting up ended")
        }
    }

    /// How long starting `count` countdowns should take: `min(count, 2000)` countdowns of an hour
    /// (`other-…`, left running: a store holds more than the sale) started in one call, scaled.
    static func loadEstimate(_ store: CountdownStore, count: Int) async throws -> Duration {
        let sample = min(count, 2_000)
        let seconds = try await timed {
            try await store.start((0..<sample).map { .countdown("other-\($0)", duration: .seconds(3600), group: "other") })
        }
        return .seconds(seconds * Double(count) / Double(sample))
    }

    /// Mass expiry, ours: `count` countdowns due at one instant a few seconds ahead, started in
    /// bulk; the consumer `sale` created at the end of the events (a consumer that was up to
    /// date); then the writer and reader, and `countdown run --consumer sale`, ready before the
    /// instant; measured until every expiry was read.
    static func expiry(place: MassPlace, count: Int, settings: MassSettings, log: (String) -> Void) async throws -> MassRun {
        try await Beside.with(db: place.db, folder: settings.folder, tag: "\(count)-instant") { beside in
            try await expiry(place: place, count: count, settings: settings, beside: beside, log: log)
        }
    }

    private static func expiry(
        place: MassPlace, count: Int, settings: MassSettings, beside: Beside, log: (String) -> Void
    ) async throws -> MassRun {
        let store = try await place.open()
        let estimate = try await loadEstimate(store, count: count)
        // Twice the estimate (the store grows as it is loaded), then 5 s to start the processes.
        let instant = ContinuousClock.now + estimate * 2 + .seconds(5)
        let loadStart = ContinuousClock.now
        let (earliest, latest) = try await startDue(store, count: count, instant: instant)
        _ = try await store.consumer("sale", startingAt: .now)
        try await store.close()
        try ahead(of: earliest)
        log(String(
            format: "  started %d in %.1f s; their deadlines %.1f ms apart, the first %.1f s ahead", count,
            (ContinuousClock.now - loadStart).seconds, (latest - earliest).seconds * 1e3, (earliest - .now).seconds))
        return try await observe(place: place, count: count, settings: settings, beside: beside, origin: earliest, log: log)
    }

    /// Catch-up, ours: `count` countdowns come due while no process runs (started to end 1 s after
    /// they are all started, the store closed, then a wait past that instant); then
    /// `countdown run --consumer sale` starts, the writer and reader beside it.
    static func catchUp(place: MassPlace, count: Int, settings: MassSettings, log: (String) -> Void) async throws -> MassRun {
        try await Beside.with(db: place.db, folder: settings.folder, tag: "\(count)-catch-up") { beside in
            try await catchUp(place: place, count: count, settings: settings, beside: beside, log: log)
        }
    }

    private static func catchUp(
        place: MassPlace, count: Int, settings: MassSettings, beside: Beside, log: (String) -> Void
    ) async throws -> MassRun {
        let store = try await place.open()
        let estimate = try await loadEstimate(store, count: count)
        let instant = ContinuousClock.now + estimate * 2 + .seconds(1)
        let (earliest, latest) = try await startDue(store, count: count, instant: instant)
        _ = try await store.consumer("sale", startingAt: .now)
        try await store.close()
        try ahead(of: earliest)
        // Waiting, not measuring: nothing runs until every countdown is due.
        try await Task.sleep(until: latest + .milliseconds(500), clock: .continuous)
        return try await observe(place: place, count: count, settings: settings, beside: beside, origin: nil, log: log)
    }

    /// Starts `countdown run --consumer sale` and sets the writer and reader going, then reads its
    /// lines until every key arrived; times are taken from `origin` (the instant) or, when nil,
    /// from the moment `countdown run` was started. `countdown run` is killed with its group when
    /// anything fails.
    static func observe(
        place: MassPlace, count: Int, settings: MassSettings, beside: Beside, origin: ContinuousClock.Instant?,
        log: (String) -> Void
    ) async throws -> MassRun {
        let tally = ExpiryTally(expected: count)
        let started = ContinuousClock.now
        let child = try Child(
            settings.tool, ["run", "--consumer", "sale", "--db", place.db],
            stderrPath: settings.folder.appendingPathComponent("run-\(count)-\(origin == nil ? "catch-up" : "instant").log").path,
            stdin: false, onOutput: { tally.consume($0, $1) })
        do {
            beside.go()
            let from = origin ?? started
            if let origin {
                // Ready before the instant: its ticker holds the lease.
                while try await place.leaseHolder() == nil {
                    if child.exited { throw BenchmarkError("countdown run ended before taking the lease; \(child.stderrTail)") }
                    guard ContinuousClock.now < started + .seconds(30) else {
                        throw BenchmarkError("countdown run took no lease within 30 s; \(child.stderrTail)")
                    }
                    try await Task.sleep(for: .milliseconds(20))
                }
                guard ContinuousClock.now < origin - .milliseconds(200) else {
                    throw BenchmarkError(String(
                        format: "countdown run was ready only %.0f ms before the instant: loading took longer than planned",
                        (origin - .now).seconds * 1e3))
                }
            }
            let limit = settings.timeout(for: count, at: place)
            // The peak as last read while it ran: read just before it is stopped, or before it
            // ended by itself.
            var peak: Int?
            let seen = await tally.wait(until: from + limit) { peak = child.peakResidentKiB ?? peak }
            peak = child.peakResidentKiB ?? peak
            let besides = await beside.stop()
            // The prune phase: with `countdown run` still holding the lease, `countdown prune`
            // deletes every ended countdown, the writer, reader and tool processes beside it.
            var prune: PrunePhase?
            if origin != nil, seen.complete != nil {
                prune = try await prunePhase(place: place, count: count, settings: settings, log: log)
            }
            // A run that ended early or delivered too little is a figure of the case (a failure),
            // not the end of the benchmark.
            var problems: [String] = []
            if seen.complete == nil {
                problems.append(
                    "countdown run " + (seen.ended ? "ended after delivering" : "delivered") + " \(seen.distinct) of \(count) expiries"
                        + (seen.ended ? "" : " within \(limit)"))
            }
            switch await child.stop(SIGTERM, within: .seconds(30)) {
            case nil: problems.append("countdown run did not end within 30 s of SIGTERM and was killed")
            case 0?: break
            case let code?: problems.append("countdown run exited with status \(code)")
            }
            if !problems.isEmpty { log("  \(problems.joined(separator: "; ")); \(child.stderrTail)") }
            if seen.others > 0 { log("  \(seen.others) lines not of the sale, such as: \(seen.otherSample ?? "")") }
            let firstLate = seen.firstLine.flatMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["late_ms"] as? NSNumber
            }?.doubleValue
            var perSecond = Double.nan
            if let complete = seen.complete, let first = seen.first {
                let span = (complete - first).seconds
                perSecond = span > 0 ? Double(count - 1) / span : .infinity
            }
            return MassRun(
                count: count, delivered: seen.distinct, firstMs: seen.first.map { ($0 - from).seconds * 1e3 } ?? .infinity,
                firstLateMs: firstLate, allSeconds: seen.complete.map { ($0 - from).seconds } ?? .infinity, perSecond: perSecond,
                duplicates: seen.duplicates, beside: besides, peakMiB: peak.map { Double($0) / 1024 },
                runProblems: problems, prune: prune)
        } catch {
            child.killGroup()
            throw error
        }
    }

    /// `countdown prune --older-than 1ms` as a process of its own, beside the writer, the reader and
    /// the tool processes (and the `countdown run` still going): how long it took, what it
    /// deleted, and how long the others waited.
    static func prunePhase(place: MassPlace, count: Int, settings: MassSettings, log: (String) -> Void) async throws
        -> PrunePhase
    {
        try await Beside.with(db: place.db, folder: settings.folder, tag: "\(count)-prune") { beside in
            beside.go()
            let started = ContinuousClock.now
            let child = try Child(
                settings.tool, ["prune", "--older-than", "1ms", "--db", place.db],
                stderrPath: settings.folder.appendingPathComponent("prune-\(count).log").path, stdin: false,
                onOutput: nil)
            let status = await child.wait(upTo: settings.timeout(for: count, at: place))
            let seconds = (ContinuousClock.now - started).seconds
            let summary = await beside.stop()
            if status != 0 {
                child.killGroup()
                log("  countdown prune: status \(status.map(String.init) ?? "none in time"); \(child.stderrTail)")
            }
            log(String(format: "  prune beside countdown run: %.1f s", seconds))
            summary.log("prune", log)
            return PrunePhase(seconds: seconds, succeeded: status == 0, beside: summary)
        }
    }

    /// Where the raw side puts its due rows: 20 minutes ahead on the wall timeline of the store at
    /// `place` (see ``Benchmarks/rawMassExpiry(count:settings:)``).
    static func rawTimeline(_ place: MassPlace) async throws -> Int64 {
        let store = try await place.open()
        let now = try await store.now()
        try await store.close()
        return now.active + now.gap + 20 * 60_000
    }

    /// `work` timed in this process with the writer and reader beside it (started before, on
    /// `place`, and set going as it begins); `work` returns the instant its first transaction
    /// committed, if it knows. `setUp` runs first, untimed, with them started.
    static func timedBeside(
        place: MassPlace, count: Int, settings: MassSettings, tag: String, setUp: () async throws -> Void = {},
        work: () async throws -> ContinuousClock.Instant?
    ) async throws -> TimedRun {
        try await Beside.with(db: place.db, folder: settings.folder, tag: tag) { beside in
            try await setUp()
            beside.go()
            let start = ContinuousClock.now
            let first = try await work()
            let end = ContinuousClock.now
            return TimedRun(
                count: count, firstMs: ((first ?? end) - start).seconds * 1e3, seconds: (end - start).seconds,
                beside: await beside.stop())
        }
    }

    /// The lines of a mass-expiry run: `title` begins each name ("mass expiry", "mass catch-up").
    static func figures(_ title: String, from origin: String, ours: MassRun, raw: TimedRun) -> [Figure] {
        let n = ours.count
        return [
            Figure(
                name: "\(title): first expiry read, after \(origin)", n: n, ours: ours.firstMs, raw: raw.firstMs, unit: "ms",
                target: origin == "the instant" ? .atMost(10) : .unjudged),
            Figure(
                name: "\(title): expiries per second, first line to last", n: n, ours: ours.perSecond, raw: raw.perSecond,
                unit: "expiries/s", target: .atLeastRatio(0.5)),
            Figure(
                name: "\(title): every expiry read, after \(origin)", n: n, ours: ours.allSeconds, raw: raw.seconds, unit: "s",
                target: .atMostRatio(2)),
            Figure(
                name: "\(title): longest write of another process", n: n, ours: ours.beside.writer.longestMs, raw: raw.beside.writer.longestMs,
                unit: "ms", target: .atMost(50)),
            Figure(
                name: "\(title): longest read of another process", n: n, ours: ours.beside.reader.longestMs, raw: raw.beside.reader.longestMs,
                unit: "ms", target: .atMost(50)),
            Figure(
                name: "\(title): slowest countdown start process beside", n: n, ours: ours.beside.toolStart.longestMs,
                raw: raw.beside.toolStart.longestMs, unit: "ms", target: .atMost(100)),
            Figure(
                name: "\(title): slowest countdown show process beside", n: n, ours: ours.beside.toolShow.longestMs,
                raw: raw.beside.toolShow.longestMs, unit: "ms", target: .atMost(100)),
            Figure(
                name: "\(title): expiries read", n: n, ours: Double(ours.delivered), raw: Double(raw.count), unit: "count",
                target: .atLeast(Double(n))),
            Figure(
                name: "\(title): failures (writes, reads, countdown run)", n: n, ours: Double(ours.failures), raw: Double(raw.failures),
                unit: "count", target: .atMost(0)),
            Figure(
                name: "\(title): peak memory of countdown run", n: n, ours: ours.peakMiB ?? .nan, raw: nil, unit: "MiB",
                target: .atMost(64)),
        ] + (ours.prune.map { prune in
            [
                Figure(
                    name: "\(title), then pruned beside countdown run: ended countdowns deleted", n: n,
                    ours: prune.succeeded ? Double(n) / prune.seconds : 0, raw: nil, unit: "items/s", target: .unjudged),
                Figure(
                    name: "\(title), then pruned: longest read of another process", n: n, ours: prune.beside.reader.longestMs,
                    raw: nil, unit: "ms", target: .atMost(50)),
                Figure(
                    name: "\(title), then pruned: slowest countdown start process beside", n: n,
                    ours: prune.beside.toolStart.longestMs, raw: nil, unit: "ms", target: .atMost(100)),
                Figure(
                    name: "\(title), then pruned: slowest countdown show process beside", n: n,
                    ours: prune.beside.toolShow.longestMs, raw: nil, unit: "ms", target: .atMost(100)),
            ]
        } ?? [])
    }

    /// What the log shows of a run beside its figures.
    static func describe(_ ours: MassRun, _ raw: TimedRun, log: (String) -> Void) {
        log(String(
            format: "  ours: %d of %d read, first line %.1f ms (its late_ms %@), every expiry %.2f s, %.0f/s, %d duplicates, countdown run peak %@ MiB",
            ours.delivered, ours.count, ours.firstMs, ours.firstLateMs.map { String(format: "%.0f", $0) } ?? "—", ours.allSeconds,
            ours.perSecond, ours.duplicates, ours.peakMiB.map { String(format: "%.1f", $0) } ?? "—"))
        ours.beside.log("ours", log)
        log(String(format: "  raw: first commit %.1f ms, every row %.2f s, %.0f/s", raw.firstMs, raw.seconds, raw.perSecond))
        raw.beside.log("raw", log)
    }
}

// MARK: - SQLite

extension Benchmarks {
    /// The store in `file`.
    func massPlace(_ file: String) -> MassPlace {
        MassPlace(
            db: file, open: { try CountdownStore(path: file, configuration: quietStore) },
            leaseHolder: {
                let db = try RawDatabase(path: file)
                let lease = try db.prepare("SELECT holder FROM countdown_lease WHERE id = 1")
                return try lease.step() ? lease.text(0) : nil
            })
    }

    /// Mass expiry at each of `sizes.mass`: ours beside raw for each.
    func massExpiry(_ settings: MassSettings) async throws -> [Figure] {
        var figures: [Figure] = []
        for count in sizes.mass {
            settle()
            log("  \(count) countdowns due at one instant…")
            let ours = try await Mass.expiry(place: massPlace(try await emptyStore("mass-\(count).sqlite")), count: count, settings: settings, log: log)
            let raw = try await rawMassExpiry(count: count, settings: settings)
            Mass.describe(ours, raw, log: log)
            figures += Mass.figures("mass expiry", from: "the instant", ours: ours, raw: raw)
        }
        return figures
    }

    /// Catch-up of `sizes.catchUp` countdowns that came due while nothing ran.
    func massCatchUp(_ settings: MassSettings) async throws -> [Figure] {
        let count = sizes.catchUp
        let ours = try await Mass.catchUp(place: massPlace(try await emptyStore("catch-up-\(count).sqlite")), count: count, settings: settings, log: log)
        let raw = try await rawMassExpiry(count: count, settings: settings)
        Mass.describe(ours, raw, log: log)
        return Mass.figures("mass catch-up", from: "countdown run started", ours: ours, raw: raw)
    }

    /// Raw: `count` due rows in a file of the store's schema, expired `settings.batch` per
    /// transaction, the helpers beside. The rows are due 20 minutes ahead on the store's own
    /// timeline (the raw side passes that as "now"): the helpers' store, which records the
    /// expiries that are due in each write, never sees them due, and the writer's countdowns
    /// of an hour come after them.
    func rawMassExpiry(count: Int, settings: MassSettings) async throws -> TimedRun {
        let file = try await emptyStore("mass-raw-\(count).sqlite")
        let timeline = try await Mass.rawTimeline(massPlace(file))
        let db = try RawDatabase(path: file)
        let expiry = try Raw.DueExpiry(db)
        let batch = settings.batch
        return try await Mass.timedBeside(place: massPlace(file), count: count, settings: settings, tag: "raw-\(count)") {
            try Raw.insertDue(db, keyPrefix: Mass.keyPrefix, count: count, group: "sale", timeline: timeline, nowMs: Date().millisecondsSince1970)
        } work: {
            var first: ContinuousClock.Instant?
            var expired = 0
            while true {
                let done = try expiry.batch(timeline: timeline, nowMs: Date().millisecondsSince1970, limit: batch)
                if first == nil { first = .now }
                expired += done
                if done < batch { break }
            }
            guard expired == count else { throw BenchmarkError("raw expired \(expired) of \(count)") }
            return first
        }
    }

    /// Pruning `sizes.prune` ended countdowns (and their events): ours with
    /// `prune(olderThan: .milliseconds(1))`, raw with DELETEs of `settings.batch` rows per
    /// transaction, each on a copy of the same file, the helpers beside.
    func massPrune(_ settings: MassSettings) async throws -> [Figure] {
        let count = sizes.prune
        let setup = try await emptyStore("prune-setup.sqlite")
        let store = try CountdownStore(path: setup, configuration: quietStore)
        for start in stride(from: 0, to: count, by: Mass.perCall) {
            try await store.start(
                (start..<min(count, start + Mass.perCall)).map { .countdown("\(Mass.keyPrefix)\($0)", duration: .milliseconds(1), group: "sale") })
        }
        // Every write records the expiries that are due: each call expired the one before; the
        // last call's are expired here.
        try await Task.sleep(for: .milliseconds(5))
        while try await !store.expireDue().isEmpty {}
        try await store.close()
        var copies: [String] = []
        for name in ["prune-ours.sqlite", "prune-raw.sqlite"] {
            let copy = path(name)
            for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: setup + suffix) {
                try FileManager.default.copyItem(atPath: setup + suffix, toPath: copy + suffix)
            }
            copies.append(copy)
        }
        // Past the cutoff of 1 ms.
        try await Task.sleep(for: .milliseconds(5))

        let oursStore = try CountdownStore(path: copies[0], configuration: quietStore)
        var pruned: PruneResult?
        let ours = try await Mass.timedBeside(place: massPlace(copies[0]), count: count, settings: settings, tag: "prune-ours") {
            pruned = try await oursStore.prune(olderThan: .milliseconds(1))
            return nil
        }
        try await oursStore.close()
        guard let pruned, pruned.items == count else {
            throw BenchmarkError("prune removed \(pruned?.items ?? 0) of \(count) countdowns")
        }

        let db = try RawDatabase(path: copies[1])
        let prune = try Raw.Prune(db)
        var deleted = (items: 0, events: 0)
        let raw = try await Mass.timedBeside(place: massPlace(copies[1]), count: count, settings: settings, tag: "prune-raw") {
            deleted = try prune.run(cutoff: Date().millisecondsSince1970 - 1, batch: settings.batch)
            return nil
        }
        guard deleted.items == count else { throw BenchmarkError("raw deleted \(deleted.items) of \(count) countdowns") }
        log(String(format: "  ours: %d countdowns and %d events in %.2f s", pruned.items, pruned.events, ours.seconds))
        ours.beside.log("ours", log)
        log(String(format: "  raw: %d countdowns and %d events in %.2f s, %d per transaction", deleted.items, deleted.events, raw.seconds, settings.batch))
        raw.beside.log("raw", log)
        return [
            Figure(
                name: "mass prune: ended countdowns deleted (and their events)", n: count, ours: ours.perSecond, raw: raw.perSecond,
                unit: "items/s", target: .atLeastRatio(0.5)),
            Figure(
                name: "mass prune: longest write of another process", n: count, ours: ours.beside.writer.longestMs, raw: raw.beside.writer.longestMs,
                unit: "ms", target: .atMost(50)),
            Figure(
                name: "mass prune: longest read of another process", n: count, ours: ours.beside.reader.longestMs, raw: raw.beside.reader.longestMs,
                unit: "ms", target: .atMost(50)),
            Figure(
                name: "mass prune: slowest countdown start process beside", n: count, ours: ours.beside.toolStart.longestMs,
                raw: raw.beside.toolStart.longestMs, unit: "ms", target: .atMost(100)),
            Figure(
                name: "mass prune: slowest countdown show process beside", n: count, ours: ours.beside.toolShow.longestMs,
                raw: raw.beside.toolShow.longestMs, unit: "ms", target: .atMost(100)),
            Figure(
                name: "mass prune: failures (writes, reads)", n: count, ours: Double(ours.failures), raw: Double(raw.failures),
                unit: "count", target: .atMost(0)),
        ]
    }
}
