import ArgumentParser
import CountdownStore
import Foundation

/// `swift run -c release CountdownBenchmarks [--quick] [--json PATH] [--only NAME] [--postgres-url URL] [--plot PATH]`
@main
struct CountdownBenchmarksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "CountdownBenchmarks",
        abstract: "Measures CountdownStore beside raw SQLite (and raw postgres-nio) doing the same work, in the same run.",
        discussion: """
            Each line runs our code and the same work through the SQLite C API on the same schema and
            connection settings, then shows the ratio and whether the target is met. With a PostgreSQL
            server (--postgres-url or COUNTDOWN_POSTGRES_URL) the store on PostgreSQL is measured too,
            beside the same statements sent through postgres-nio. The mass cases (--only mass) run real
            processes side by side: countdown run, the tool of the same build, expiring countdowns due at
            one instant, with a writer and a reader beside it; they also write a plot (--plot). Run it in
            a release build:
            swift run -c release CountdownBenchmarks
            """)

    @Flag(help: "Small sizes, to prove the benchmarks run (figures are not meaningful).")
    var quick = false

    @Option(help: "Also write the figures as JSON to this file.")
    var json: String?

    @Option(help: "Run only the benchmarks whose name contains this text (repeatable).")
    var only: [String] = []

    @Option(help: "Folder for the benchmark databases, kept afterwards; a large store built there before is reused; one run at a time (default: a new temporary folder, removed afterwards).")
    var folder: String?

    @Option(
        name: .customLong("postgres-url"),
        help: "A PostgreSQL server for the PostgreSQL cases, postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE (default: COUNTDOWN_POSTGRES_URL); without one they are skipped. They work in schemas of their own, dropped afterwards.")
    var postgresURL: String?

    @Option(help: "Where the mass-expiry cases write their plot, an SVG file (default: Benchmarks/mass-expiry.svg in the package).")
    var plot: String?

    @Option(name: .customLong("plot-from"), help: "Write the mass-expiry plot from the figures of an earlier run (a file written by --json), and run nothing.")
    var plotFrom: String?

    @Option(name: .customLong("mass-size"), help: "Countdowns due at one instant in the mass-expiry case, instead of its sizes (repeatable).")
    var massSizes: [Int] = []

    @Option(
        name: .customLong("curve-size"),
        help: "Store sizes of the cost curve (repeatable; default 10,000, 100,000, 1,000,000 and 10,000,000). The curve runs with --only curve (and in --quick, at 2,000 and 10,000).")
    var curveSizes: [Int] = []

    @Option(help: "Where the cost curve writes its plot, an SVG file (default: Benchmarks/cost-curve.svg in the package).")
    var curvePlot: String?

    @Option(name: .customLong("mass-batch"), help: "Rows per transaction of the raw side of the mass cases.")
    var massBatch = 1_000

    @Option(name: .customLong("mass-timeout"), help: "Seconds countdown run may take to deliver every expiry of a mass case (default: 120 plus 1 ms per countdown, 4 ms on PostgreSQL).")
    var massTimeout: Int?

    @Option(help: .hidden)
    var probe: String?

    @Option(help: .hidden)
    var helper: String?

    @Option(help: .hidden)
    var db: String?

    @Option(help: .hidden)
    var seconds: Int = 30

    @Flag(help: .hidden)
    var raw = false

    func run() async throws {
        if let helper {
            guard let db else { throw ValidationError("--helper needs --db") }
            try await CountdownBenchmarks.helper(role: helper, db: db, key: "\(Mass.keyPrefix)0", interval: .milliseconds(5), limit: .seconds(3600))
            return
        }
        if let plotFrom {
            let figures = try Report.figures(json: Data(contentsOf: URL(fileURLWithPath: plotFrom)))
            guard let svg = MassPlot.svg(figures, batch: massBatch) else { throw ValidationError("\(plotFrom) has no mass-expiry figures") }
            let path = plot ?? MassPlot.defaultPath
            try Data(svg.utf8).write(to: URL(fileURLWithPath: path))
            print("the mass-expiry plot: \(path)")
            return
        }
        if let probe {
            try await CountdownBenchmarks.probe(file: probe, seconds: seconds, raw: raw)
            return
        }
        #if DEBUG
        print("warning: a debug build; measure with: swift run -c release CountdownBenchmarks")
        #endif
        let ownFolder = folder == nil
        let folderURL = URL(fileURLWithPath: folder ?? NSTemporaryDirectory())
            .appendingPathComponent(ownFolder ? "countdown-benchmarks-\(ProcessInfo.processInfo.processIdentifier)" : "")
        try FileManager.default.createDirectory(at: folderURL, withIntermediateDirectories: true)
        defer { if ownFolder { try? FileManager.default.removeItem(at: folderURL) } }
        // Two runs in one folder would remove and rewrite each other's stores: the second refuses.
        let lockPath = folderURL.appendingPathComponent(".countdown-benchmarks.lock").path
        let folderLock = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard folderLock >= 0 else { throw ValidationError("cannot open \(lockPath): \(String(cString: strerror(errno)))") }
        guard flock(folderLock, LOCK_EX | LOCK_NB) == 0 else {
            throw ValidationError("another CountdownBenchmarks run is using the folder \(folderURL.path); give another --folder")
        }
        defer { close(folderLock) }

        let log: @Sendable (String) -> Void = { line in FileHandle.standardError.write(Data((line + "\n").utf8)) }
        var sizes: Sizes = quick ? .quick : .full
        if !massSizes.isEmpty { sizes.mass = massSizes }
        let benchmarks = Benchmarks(sizes: sizes, folder: folderURL, log: log)
        let (massBatch, massTimeout) = (self.massBatch, self.massTimeout)
        guard massBatch > 0 else { throw ValidationError("--mass-batch must be more than 0") }
        let massSettings = {
            MassSettings(batch: massBatch, tool: try MassSettings.tool(), timeout: massTimeout.map { .seconds($0) }, folder: folderURL)
        }
        let only = self.only
        func wanted(_ name: String) -> Bool { only.isEmpty || only.contains { name.contains($0) } }

        var figures: [Figure] = []
        func add(_ name: String, _ body: () async throws -> [Figure]) async throws {
            guard wanted(name) else { return }
            benchmarks.settle()
            log("· \(name)…")
            let new = try await body()
            for figure in new {
                log(String(format: "  %@: ours %@ %@, raw %@", figure.name, Target.number(figure.ours), figure.unit, figure.raw.map(Target.number) ?? "—"))
            }
            figures += new
        }
        // The cases that measure wake-ups run first, before the others leave hundreds of
        // megabytes for the kernel to write back.
        try await add("lateness") { try await benchmarks.lateness() }
        try await add("ticks") { [try await benchmarks.displayTicks()] }
        try await add("bulk") { [try await benchmarks.bulkStart()] }
        try await add("single") { [try await benchmarks.singleStart()] }
        try await add("single full") { [try await benchmarks.singleStart(durability: .full)] }
        // Group commit: many tasks, one call each.
        for durability in [CountdownStore.Durability.normal, .full] {
            for tasks in Benchmarks.taskCounts {
                try await add("tasks \(tasks) \(durability == .full ? "full" : "normal")") {
                    [try await benchmarks.concurrentStarts(tasks: tasks, durability: durability)]
                }
            }
            try await add("grouping ceiling \(durability == .full ? "full" : "normal")") {
                [try await benchmarks.groupedCeiling(tasks: 64, durability: durability)]
            }
        }
        try await add("lone caller") { try await benchmarks.loneLatency() }
        try await add("host transaction") { try await benchmarks.hostTransactions() }
        let needsLarge = ["next", "soonest", "expiring", "open", "idle"].contains(where: wanted)
        if needsLarge {
            log("· building a store of \(benchmarks.sizes.stored) items…")
            let large = try await benchmarks.largeStore(reuse: !ownFolder)
            try await add("next") { [try await benchmarks.nextDeadline(large)] }
            try await add("soonest") { [try await benchmarks.soonest(large)] }
            try await add("expiring") { [try await benchmarks.expiring(large)] }
            try await add("open") { [try await benchmarks.openToReady(large)] }
            try await add("idle") { try await benchmarks.idle(large) }
        }
        // Real processes side by side: `countdown run`, a writer and a reader.
        try await add("mass expiry") { try await benchmarks.massExpiry(try massSettings()) }
        try await add("mass catch-up") { try await benchmarks.massCatchUp(try massSettings()) }
        try await add("mass prune") { try await benchmarks.massPrune(try massSettings()) }
        try await add("mass fairness") { try await benchmarks.smallGroupsBesideBacklog() }
        // The cost curve, in its long form only when asked by name (it builds a store of ten million).
        if quick || only.contains(where: { "curve".contains($0) || $0.contains("curve") }) {
            let curveSizes = self.curveSizes.isEmpty ? (quick ? [2_000, 10_000] : [10_000, 100_000, 1_000_000, 10_000_000]) : self.curveSizes
            try await add("curve") { try await benchmarks.costCurve(sizes: curveSizes, mass: massSettings) }
        }
        // `countdown serve` beside event streams that never read and clients that never finish.
        try await add("serve crowd") { try await benchmarks.serveCrowd(tool: try MassSettings.tool()) }
        let postgresSkipped = try await PostgresBenchmarks.measure(
            url: postgresURL ?? ProcessInfo.processInfo.environment["COUNTDOWN_POSTGRES_URL"], quick: quick, log: log,
            wanted: wanted, mass: massSettings, add: add)

        print(Report.table(figures))
        if let postgresSkipped { print(postgresSkipped) }
        if let svg = MassPlot.svg(figures, batch: massBatch) {
            let path = plot ?? MassPlot.defaultPath
            try Data(svg.utf8).write(to: URL(fileURLWithPath: path))
            print("the mass-expiry plot: \(path)")
        }
        if let svg = CurvePlot.svg(figures) {
            let path = curvePlot ?? CurvePlot.defaultPath
            try Data(svg.utf8).write(to: URL(fileURLWithPath: path))
            print("the cost-curve plot: \(path)")
        }
        if let json {
            try Report.json(figures).write(to: URL(fileURLWithPath: json))
        }
        let missed = figures.filter { !$0.meets }.map(\.name)
        if !missed.isEmpty {
            print("targets missed: \(missed.joined(separator: ", "))" + (quick ? " (quick sizes: not judged)" : ""))
        }
    }
}
