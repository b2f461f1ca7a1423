import CountdownStore
import Foundation

/// The cost curve: stores of growing size (10,000 to 10,000,000 countdowns, shaped like the large
/// store), and at each size what a host pays: opening, `countdown run`'s memory, the lookups,
/// the bytes on disk, the integrity checks, a mass expiry inside it and pruning its ended items.
extension Benchmarks {
    /// Countdowns due at one instant inside the stores of at least a million.
    static let curveMass = 100_000

    /// Every figure of the curve, size after size.
    func costCurve(sizes curveSizes: [Int], mass: () throws -> MassSettings) async throws -> [Figure] {
        var figures: [Figure] = []
        var atMillion: [String: Double] = [:]
        for count in curveSizes.sorted() {
            var sized = self
            sized.sizes.stored = count
            log("  a store of \(count) countdowns…")
            let building = ContinuousClock.now
            let file = try await sized.curveStore(count)
            log(String(format: "  built in %.1f s", (ContinuousClock.now - building).seconds))
            var here: [Figure] = []
            func add(_ figure: Figure, name: String) {
                var renamed = figure
                renamed.name = "curve: \(name)"
                renamed.n = count
                here.append(renamed)
            }
            add(try await sized.openToReady(file), name: "open to ready")
            here[here.count - 1].target = .atMost(10)
            add(try await sized.nextDeadline(file), name: "next-deadline lookup")
            add(try await sized.soonest(file), name: "100 soonest active with remaining")
            add(try await sized.groupPage(file), name: "a page of 100 by group")
            let bytes = try fileBytes(file)
            add(
                Figure(name: "", n: count, ours: Double(bytes) / Double(count), raw: nil, unit: "bytes", target: .unjudged),
                name: "bytes on disk per countdown")
            add(
                Figure(name: "", n: count, ours: try await runResidentMiB(file, tool: try mass().tool), raw: nil, unit: "MiB", target: .atMost(64)),
                name: "countdown run resident memory")
            for check in ["quick", "full"] {
                add(
                    Figure(
                        name: "", n: count, ours: try await doctorSeconds(file, check: check, tool: try mass().tool), raw: nil, unit: "s",
                        target: .unjudged),
                    name: "countdown doctor, \(check) integrity check")
            }
            if count >= 1_000_000 {
                let settings = try mass()
                let run = try await Mass.expiry(place: massPlace(file), count: Self.curveMass, settings: settings, log: log)
                add(
                    Figure(name: "", n: count, ours: run.firstMs, raw: nil, unit: "ms", target: .atMost(10)),
                    name: "mass expiry of 100,000 inside: first expiry read")
                add(
                    Figure(name: "", n: count, ours: run.perSecond, raw: nil, unit: "expiries/s", target: .unjudged),
                    name: "mass expiry of 100,000 inside: expiries per second")
                add(
                    Figure(
                        name: "", n: count, ours: max(run.beside.writer.longestMs, run.beside.toolStart.longestMs), raw: nil, unit: "ms",
                        target: .atMost(100)),
                    name: "mass expiry of 100,000 inside: another writer's longest wait")
                add(
                    Figure(name: "", n: count, ours: Double(run.failures), raw: nil, unit: "count", target: .atMost(0)),
                    name: "mass expiry of 100,000 inside: failures")
            }
            let (pruned, seconds) = try await sized.pruneEnded(file, count: count / 12)
            add(
                Figure(name: "", n: count, ours: Double(pruned) / seconds, raw: nil, unit: "items/s", target: .unjudged),
                name: "pruning a month of ended items (1/12 of the store)")
            // Lookups at ten million within twice their figure at one million.
            for figure in here where ["next-deadline lookup", "100 soonest active with remaining", "a page of 100 by group"].contains(
                figure.name.replacingOccurrences(of: "curve: ", with: ""))
            {
                if count == 1_000_000 { atMillion[figure.name] = figure.ours }
                if count > 1_000_000, let base = atMillion[figure.name] {
                    here.append(
                        Figure(
                            name: figure.name + " against 1,000,000", n: count, ours: figure.ours / base, raw: nil, unit: "×",
                            target: .atMost(2)))
                }
            }
            for figure in here {
                log(String(format: "  %@: %@ %@", figure.name, Target.number(figure.ours), figure.unit))
            }
            figures += here
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: file + suffix) }
        }
        return figures
    }

    /// A new store of `count` countdowns shaped like the large store (``largeStore(reuse:)``),
    /// with its pauses made by 32 tasks at once (group commit).
    func curveStore(_ count: Int) async throws -> String {
        let file = try await emptyStore("curve-\(count).sqlite")
        let store = try CountdownStore(path: file, configuration: quietStore)
        for chunkStart in stride(from: 0, to: count, by: 100_000) {
            let requests = (chunkStart..<min(count, chunkStart + 100_000)).map { index in
                let duration = 2 * Self.hour + Int64(index) * 7919 % (30 * 24 * Self.hour)
                return CountdownRequest.countdown(
                    String(format: "item-%08d", index), duration: .milliseconds(duration), group: "g\(index % 50)",
                    policy: index % 10 == 3 ? .active : .wall)
            }
            try await store.start(requests)
        }
        try await Self.inTasks(32, stride(from: 7, to: count, by: 20).map { $0 }) { index in
            try await store.pause(String(format: "item-%08d", index))
        }
        try await store.close()
        return file
    }

    /// Runs `body` for every element of `items`, `tasks` at a time.
    static func inTasks(_ tasks: Int, _ items: [Int], _ body: @escaping @Sendable (Int) async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<tasks {
                group.addTask {
                    for position in stride(from: task, to: items.count, by: tasks) { try await body(items[position]) }
                }
            }
            try await group.waitForAll()
        }
    }

    /// A page of 100 active countdowns of one group, soonest first, time after time.
    func groupPage(_ file: String) async throws -> Figure {
        let store = try CountdownStore(path: file, configuration: quietStore)
        let count = sizes.soonest
        var times: [Double] = []
        for round in 0..<(sizes.rounds * 2 + 1) {
            times.append(
                try await timed {
                    for index in 0..<count {
                        let page = try await store.list(.active, group: "g\((index + round) % 50)", limit: 100)
                        precondition(page.count == min(100, sizes.stored / 50))
                    }
                } / Double(count))
        }
        try await store.close()
        times.sort()
        return Figure(name: "", n: sizes.stored, ours: times[times.count / 2] * 1e6, raw: nil, unit: "µs", target: .unjudged)
    }

    /// The bytes of the database file and its WAL.
    func fileBytes(_ file: String) throws -> Int {
        ["", "-wal"].reduce(0) { total, suffix in
            total + ((try? FileManager.default.attributesOfItem(atPath: file + suffix)[.size] as? Int) ?? 0)
        }
    }

    /// `countdown run`'s resident memory once it holds the lease and has run for 3 s.
    func runResidentMiB(_ file: String, tool: String) async throws -> Double {
        let child = try Child(tool, ["run", "--db", file], stderrPath: path("run-curve.log"), stdin: false, onOutput: nil)
        defer { child.killGroup() }
        let place = massPlace(file)
        let started = ContinuousClock.now
        while try await place.leaseHolder() == nil {
            if child.exited { throw BenchmarkError("countdown run ended before taking the lease; \(child.stderrTail)") }
            guard ContinuousClock.now < started + .seconds(60) else { throw BenchmarkError("countdown run took no lease within 60 s") }
            try await Task.sleep(for: .milliseconds(20))
        }
        try await Task.sleep(for: .seconds(3))
        guard let kib = child.peakResidentKiB else { throw BenchmarkError("no resident memory read for countdown run") }
        _ = await child.stop(SIGTERM, within: .seconds(30))
        return Double(kib) / 1024
    }

    /// How long `countdown doctor --integrity CHECK` takes, whole.
    func doctorSeconds(_ file: String, check: String, tool: String) async throws -> Double {
        let start = ContinuousClock.now
        let child = try Child(tool, ["doctor", "--integrity", check, "--db", file], stderrPath: path("run-doctor.log"), stdin: false, onOutput: nil)
        let code = await child.wait(upTo: .seconds(1800))
        guard code == 0 else {
            child.killGroup()
            throw BenchmarkError("countdown doctor --integrity \(check) ended with \(code.map(String.init) ?? "no status"); \(child.stderrTail)")
        }
        return (ContinuousClock.now - start).seconds
    }

    /// Cancels `count` running countdowns (32 tasks at once), then prunes every ended item;
    /// returns how many items the prune removed and how long it took.
    func pruneEnded(_ file: String, count: Int) async throws -> (Int, Double) {
        let store = try CountdownStore(path: file, configuration: quietStore)
        try await Self.inTasks(32, stride(from: 0, to: sizes.stored, by: 12).filter { $0 % 20 != 7 }.prefix(count).map { $0 }) { index in
            try await store.cancel(String(format: "item-%08d", index))
        }
        var removed = 0
        let seconds = try await timed { removed = try await store.prune(olderThan: .milliseconds(1)).items }
        try await store.close()
        return (removed, seconds)
    }
}

/// The cost curve as a standalone SVG: each figure against the store's size, log scales.
enum CurvePlot {
    static let defaultPath: String = {
        let benchmarks = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        return benchmarks.appendingPathComponent("cost-curve.svg").path
    }()

    /// The panels: their title, and the figures (by name, without `curve: `) drawn in each.
    static let panels: [(title: String, unit: String, names: [String])] = [
        ("lookups (µs)", "µs", ["next-deadline lookup", "100 soonest active with remaining", "a page of 100 by group"]),
        ("open to ready (ms), countdown run (MiB), bytes per countdown", "", [
            "open to ready", "countdown run resident memory", "bytes on disk per countdown",
        ]),
        ("whole-store work (s): countdown doctor", "s", ["countdown doctor, quick integrity check", "countdown doctor, full integrity check"]),
        ("pruning (items/s) and a mass expiry of 100,000 inside (expiries/s)", "/s", [
            "pruning a month of ended items (1/12 of the store)", "mass expiry of 100,000 inside: expiries per second",
        ]),
    ]

    static let colors = ["#1f6fd1", "#d1701f", "#2a9d3a", "#8e44ad"]

    /// The legend's words for each figure.
    static let short = [
        "next-deadline lookup": "next deadline", "100 soonest active with remaining": "100 soonest",
        "a page of 100 by group": "page by group", "open to ready": "open (ms)", "countdown run resident memory": "run (MiB)",
        "bytes on disk per countdown": "bytes each", "countdown doctor, quick integrity check": "quick check",
        "countdown doctor, full integrity check": "full check", "pruning a month of ended items (1/12 of the store)": "pruning",
        "mass expiry of 100,000 inside: expiries per second": "mass expiry",
    ]

    /// The plot of the curve's figures, or nil when there are none.
    static func svg(_ figures: [Figure]) -> String? {
        let curve = figures.filter { $0.name.hasPrefix("curve: ") }
        guard !curve.isEmpty else { return nil }
        let ns = curve.map { Double($0.n) }
        let xRange = MassPlot.decades(ns)
        var body: [String] = []
        body.append(MassPlot.text(MassPlot.width / 2, 24, "The cost curve: a store of N countdowns (SQLite)", size: 16, anchor: "middle", weight: "bold"))
        body.append(MassPlot.text(MassPlot.width / 2, 42, "each figure against N, both axes on log scales", size: 11, anchor: "middle", fill: "#555"))
        var y = MassPlot.top
        for panel in panels {
            let series = panel.names.enumerated().compactMap { index, name -> MassPlot.Series? in
                let points = curve.filter { $0.name == "curve: \(name)" }.map { (Double($0.n), $0.ours) }.sorted { $0.0 < $1.0 }
                guard !points.isEmpty else { return nil }
                return MassPlot.Series(label: short[name] ?? name, color: colors[index % colors.count], dash: nil, marker: "circle", points: points)
            }
            guard !series.isEmpty else { continue }
            let values = series.flatMap { $0.points.map(\.1) }
            body += MassPlot.panel(y: y, title: panel.title, xRange: xRange, yRange: MassPlot.decades(values), series: series)
            y += MassPlot.panelHeight + MassPlot.gap
        }
        let height = y + 10
        body.append(
            MassPlot.text(
                MassPlot.left + (MassPlot.width - MassPlot.left - MassPlot.right) / 2, height - 12, "N (countdowns in the store, log scale)",
                size: 12, anchor: "middle"))
        return """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(MassPlot.width))" height="\(Int(height))" viewBox="0 0 \(Int(MassPlot.width)) \(Int(height))" font-family="Helvetica, Arial, sans-serif">
            <rect width="100%" height="100%" fill="#fff"/>
            \(body.joined(separator: "\n"))
            </svg>

            """
    }
}
