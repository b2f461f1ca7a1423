import CountdownStore
import Foundation

// Small groups beside a big group's backlog: `count` countdowns of group `sale` come due at one
// instant and this process's ticker drains them, a consumer of the sale reading them all; beside
// them, small groups whose countdowns come due during the drain, each group read by a consumer
// of its own. Two shapes: ten groups of five countdowns (due 0.5 s to 8 s after the sale), and a
// hundred groups of one (due every 50 ms from 0.1 s on). For each small countdown: how late its
// expiry was recorded (`late_ms`) and delivered to its group's consumer. For the sale: its first
// expiry's lateness and the rate its consumer got them at.

/// One small group's countdowns: when each is due after the sale's instant (ms).
struct SmallGroup {
    var name: String
    var offsetsMs: [Int64]
}

/// What one fairness run measured.
struct FairnessRun {
    var label: String
    var count: Int
    /// (due after the sale's instant in ms, recorded late in ms, delivered late in ms), each small countdown.
    var small: [(dueMs: Int64, recordedMs: Double, deliveredMs: Double)]
    var saleFirstLateMs: Double
    var saleDeliveredPerSecond: Double
    var saleDrainSeconds: Double
}

enum Fairness {
    /// Ten groups of five, due 0.5, 1, 2, 4 and 8 s after the sale.
    static let tenGroups = (0..<10).map { SmallGroup(name: "shop-\($0)", offsetsMs: [500, 1_000, 2_000, 4_000, 8_000]) }
    /// A hundred groups of one, due every 50 ms from 0.1 s on.
    static let hundredGroups = (0..<100).map { SmallGroup(name: "tenant-\($0)", offsetsMs: [100 + Int64($0) * 50]) }

    /// Starts the sale and the small groups in `store`, runs its ticker and the consumers until
    /// every small countdown was delivered and the sale drained (or `timeout`), and measures.
    static func run(
        _ store: CountdownStore, label: String, count: Int, groups: [SmallGroup], timeout: Duration,
        log: (String) -> Void
    ) async throws -> FairnessRun {
        let batch = 10_000
        let started = ContinuousClock.now
        let spanMs: Int64 = count > 100_000 ? 120_000 : count > 10_000 ? 30_000 : 8_000
        for first in stride(from: 0, to: count, by: batch) {
            let elapsed = Int64((ContinuousClock.now - started).seconds * 1000)
            let requests = (first..<min(count, first + batch)).map { index in
                CountdownRequest.countdown(
                    "sale-\(index)", duration: .milliseconds(max(1, spanMs - elapsed)), group: "sale")
            }
            try await store.start(requests)
        }
        let elapsed = Int64((ContinuousClock.now - started).seconds * 1000)
        guard elapsed < spanMs - 3_000 else { throw BenchmarkError("starting \(count) took \(elapsed) ms") }
        // Every small countdown, timed from the same instant as the sale's.
        let saleDueMs = spanMs - elapsed
        var requests: [CountdownRequest] = []
        for group in groups {
            for (index, offset) in group.offsetsMs.enumerated() {
                requests.append(
                    .countdown("\(group.name)-\(index)", duration: .milliseconds(saleDueMs + offset), group: group.name))
            }
        }
        try await store.start(requests)
        let saleInstant = try requireValue(try await store.countdown("sale-\(count - 1)")?.deadlineAt, "the sale's deadline")
        let smallTotal = groups.reduce(0) { $0 + $1.offsetsMs.count }

        let ticker = CountdownTicker(store: store)
        let ticking = Task { try await ticker.run() }
        defer { ticking.cancel() }
        // Each small group's consumer: when each of its expiries arrived.
        let delivered = try await withThrowingTaskGroup(of: [(CountdownEvent, Date)].self) { tasks in
            for group in groups {
                tasks.addTask {
                    let consumer = try await store.consumer("fair-\(group.name)")
                    var got: [(CountdownEvent, Date)] = []
                    for try await event in try await consumer.events(EventFilter(kinds: [.expired], group: group.name)) {
                        got.append((event, Date()))
                        try await consumer.acknowledge(event)
                        if got.count == group.offsetsMs.count { break }
                    }
                    return got
                }
            }
            // The sale's consumer, acknowledging every thousandth.
            tasks.addTask {
                let consumer = try await store.consumer("fair-sale")
                var seen = 0
                var first: CountdownEvent?
                for try await event in try await consumer.events(EventFilter(kinds: [.expired], group: "sale")) {
                    if first == nil { first = event }
                    seen += 1
                    if seen % 1_000 == 0 || seen == count { try await consumer.acknowledge(through: event.id) }
                    if seen == count { break }
                }
                // The first expiry, with when the last arrived.
                return first.map { [($0, Date())] } ?? []
            }
            tasks.addTask {
                try await Task.sleep(for: timeout)
                throw BenchmarkError("\(label): not every expiry delivered within \(timeout)")
            }
            var all: [(CountdownEvent, Date)] = []
            var done = 0
            while done < groups.count + 1, let got = try await tasks.next() {
                all += got
                done += 1
            }
            tasks.cancelAll()
            return all
        }
        ticking.cancel()
        _ = await ticking.result
        var small: [(dueMs: Int64, recordedMs: Double, deliveredMs: Double)] = []
        var saleFirst: CountdownEvent?
        var end = Date()
        for (event, at) in delivered {
            if event.group == "sale" {
                saleFirst = event
                end = at
                continue
            }
            guard let deadline = event.deadlineAt else { continue }
            small.append(
                (
                    Int64((deadline.timeIntervalSince(saleInstant) * 1000).rounded()),
                    (event.late ?? .zero).seconds * 1000, at.timeIntervalSince(deadline) * 1000
                ))
        }
        guard small.count == smallTotal, let saleFirst else {
            throw BenchmarkError("\(label): \(small.count) of \(smallTotal) small expiries delivered, sale first: \(saleFirst != nil)")
        }
        let drain = end.timeIntervalSince(saleInstant)
        let run = FairnessRun(
            label: label, count: count, small: small.sorted { $0.dueMs < $1.dueMs },
            saleFirstLateMs: (saleFirst.late ?? .zero).seconds * 1000, saleDeliveredPerSecond: Double(count) / drain,
            saleDrainSeconds: drain)
        let worst = small.sorted { $0.recordedMs > $1.recordedMs }.prefix(5)
            .map { String(format: "%.0f ms (due %.2f s)", $0.recordedMs, Double($0.dueMs) / 1000) }
        log("  \(label): the latest recorded: \(worst.joined(separator: ", "))")
        log(
            String(
                format: "  %@: %d due at once, drained in %.1f s (%.0f/s to its consumer), first %.1f ms late; "
                    + "%d small: recorded ≤ %.1f ms late, delivered ≤ %.1f ms after the deadline",
                label, count, drain, run.saleDeliveredPerSecond, run.saleFirstLateMs, small.count,
                small.map(\.recordedMs).max() ?? 0, small.map(\.deliveredMs).max() ?? 0))
        return run
    }

    /// The figures of a run, named `prefix …`.
    static func figures(_ prefix: String, _ run: FairnessRun) -> [Figure] {
        let n = run.count
        return [
            Figure(
                name: "\(prefix) \(run.label): slowest small group's expiry recorded late", n: n,
                ours: run.small.map(\.recordedMs).max() ?? 0, raw: nil, unit: "ms", target: .atMost(10)),
            Figure(
                name: "\(prefix) \(run.label): slowest small group's expiry delivered after its deadline", n: n,
                ours: run.small.map(\.deliveredMs).max() ?? 0, raw: nil, unit: "ms", target: .atMost(50)),
            Figure(
                name: "\(prefix) \(run.label): the big group's first expiry recorded late", n: n, ours: run.saleFirstLateMs,
                raw: nil, unit: "ms", target: .atMost(10)),
            Figure(
                name: "\(prefix) \(run.label): the big group delivered to its consumer", n: n,
                ours: run.saleDeliveredPerSecond, raw: nil, unit: "items/s", target: .unjudged),
        ]
    }

    /// Lateness over the drain, per group: each small countdown's recorded and delivered lateness
    /// against when it was due after the sale's instant, one panel a run.
    static func svg(_ runs: [FairnessRun]) -> String {
        let width = 760.0
        let panel = 260.0
        let (left, right, top, gap) = (70.0, 200.0, 60.0, 70.0)
        let plotWidth = width - left - right
        let height = top + Double(runs.count) * (panel + gap)
        var lines = [
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" "
                + "font-family=\"sans-serif\" font-size=\"12\">",
            "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>",
            "<text x=\"\(left)\" y=\"28\" font-size=\"15\">Small groups beside a big group's backlog: lateness per "
                + "countdown over the drain</text>",
        ]
        for (index, run) in runs.enumerated() {
            let y0 = top + Double(index) * (panel + gap)
            let maxX = max(1.0, Double(run.small.map(\.dueMs).max() ?? 1) / 1000, run.saleDrainSeconds)
            let maxY = max(10.0, (run.small.map { max($0.recordedMs, $0.deliveredMs) }.max() ?? 0) * 1.1, 60)
            func px(_ seconds: Double) -> Double { left + seconds / maxX * plotWidth }
            func py(_ ms: Double) -> Double { y0 + panel - min(ms, maxY) / maxY * panel }
            lines.append(
                "<text x=\"\(left)\" y=\"\(y0 - 10)\" font-size=\"13\">\(run.label): \(run.count) due at once, "
                    + String(format: "drained in %.1f s", run.saleDrainSeconds) + "</text>")
            lines.append(
                "<rect x=\"\(left)\" y=\"\(y0)\" width=\"\(plotWidth)\" height=\"\(panel)\" fill=\"none\" stroke=\"#999\"/>")
            for tick in 0...4 {
                let ms = maxY * Double(tick) / 4
                lines.append(
                    "<text x=\"\(left - 6)\" y=\"\(py(ms) + 4)\" text-anchor=\"end\">\(Int(ms.rounded())) ms</text>")
                let seconds = maxX * Double(tick) / 4
                lines.append(
                    "<text x=\"\(px(seconds))\" y=\"\(y0 + panel + 16)\" text-anchor=\"middle\">"
                        + String(format: "%.1f s", seconds) + "</text>")
            }
            for (ms, color) in [(10.0, "#2a7"), (50.0, "#c70")] where ms <= maxY {
                lines.append(
                    "<line x1=\"\(left)\" x2=\"\(left + plotWidth)\" y1=\"\(py(ms))\" y2=\"\(py(ms))\" stroke=\"\(color)\" "
                        + "stroke-dasharray=\"4 3\"/>")
            }
            // The drain: from the sale's instant to its last delivery.
            lines.append(
                "<rect x=\"\(px(0))\" y=\"\(y0 + panel - 6)\" width=\"\(px(run.saleDrainSeconds) - px(0))\" height=\"6\" "
                    + "fill=\"#ccc\"/>")
            for point in run.small {
                let x = px(Double(point.dueMs) / 1000)
                lines.append("<circle cx=\"\(x)\" cy=\"\(py(point.recordedMs))\" r=\"3\" fill=\"#1f5fbf\"/>")
                lines.append(
                    "<circle cx=\"\(x)\" cy=\"\(py(point.deliveredMs))\" r=\"3\" fill=\"none\" stroke=\"#d04020\"/>")
            }
            let legend = left + plotWidth + 14
            lines += [
                "<circle cx=\"\(legend)\" cy=\"\(y0 + 14)\" r=\"3\" fill=\"#1f5fbf\"/>",
                "<text x=\"\(legend + 10)\" y=\"\(y0 + 18)\">recorded late</text>",
                "<circle cx=\"\(legend)\" cy=\"\(y0 + 34)\" r=\"3\" fill=\"none\" stroke=\"#d04020\"/>",
                "<text x=\"\(legend + 10)\" y=\"\(y0 + 38)\">delivered late</text>",
                "<rect x=\"\(legend - 4)\" y=\"\(y0 + 50)\" width=\"10\" height=\"6\" fill=\"#ccc\"/>",
                "<text x=\"\(legend + 10)\" y=\"\(y0 + 57)\">the big group's drain</text>",
                "<text x=\"\(legend)\" y=\"\(y0 + 80)\">dashed: 10 and 50 ms</text>",
                "<text x=\"\(legend)\" y=\"\(y0 + 96)\">x: due after the big</text>",
                "<text x=\"\(legend)\" y=\"\(y0 + 110)\">group's instant</text>",
            ]
        }
        lines.append("</svg>")
        return lines.joined(separator: "\n") + "\n"
    }

    /// Where the plot goes by default: beside the benchmark's other plots.
    static var defaultPath: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("fairness.svg").path
    }
}

/// `value`, or a benchmark error when it is missing.
func requireValue<T>(_ value: T?, _ what: String = "a value") throws -> T {
    guard let value else { throw BenchmarkError("missing \(what)") }
    return value
}

extension Benchmarks {
    /// On SQLite, at each of `sizes.mass`: ten small groups beside the big one, and a hundred
    /// groups of one beside it.
    func smallGroupsBesideBacklog() async throws -> [Figure] {
        var figures: [Figure] = []
        var runs: [FairnessRun] = []
        for count in sizes.mass {
            for (label, groups) in [("ten groups of five", Fairness.tenGroups), ("a hundred groups of one", Fairness.hundredGroups)] {
                settle()
                let store = try CountdownStore(path: try await emptyStore("mass-fair-\(count).sqlite"), configuration: quietStore)
                let run = try await Fairness.run(
                    store, label: label, count: count, groups: groups, timeout: .seconds(600), log: log)
                try await store.close()
                runs.append(run)
                figures += Fairness.figures("fairness, SQLite:", run)
            }
        }
        let path = Fairness.defaultPath
        try Data(Fairness.svg(runs).utf8).write(to: URL(fileURLWithPath: path))
        log("  the fairness plot: \(path)")
        return figures
    }
}
