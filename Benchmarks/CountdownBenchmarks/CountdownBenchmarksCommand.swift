import ArgumentParser
import Foundation

/// `swift run -c release CountdownBenchmarks [--quick] [--json PATH] [--postgres-url URL]`
@main
struct CountdownBenchmarksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "CountdownBenchmarks",
        abstract: "Measures CountdownStore beside raw SQLite (and raw postgres-nio) doing the same work, in the same run.",
        discussion: """
            Each line runs our code and the same work through the SQLite C API on the same schema and
            connection settings, then shows the ratio and whether the target is met. With a PostgreSQL
            server (--postgres-url or COUNTDOWN_POSTGRES_URL) the store on PostgreSQL is measured too,
            beside the same statements sent through postgres-nio. Run it in a release build:
            swift run -c release CountdownBenchmarks
            """)

    @Flag(help: "Small sizes, to prove the benchmarks run (figures are not meaningful).")
    var quick = false

    @Option(help: "Also write the figures as JSON to this file.")
    var json: String?

    @Option(help: "Run only the benchmarks whose name contains this text (repeatable).")
    var only: [String] = []

    @Option(help: "Folder for the benchmark databases, kept afterwards; a large store built there before is reused (default: a new temporary folder, removed afterwards).")
    var folder: String?

    @Option(
        name: .customLong("postgres-url"),
        help: "A PostgreSQL server for the PostgreSQL cases, postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE (default: COUNTDOWN_POSTGRES_URL); without one they are skipped. They work in schemas of their own, dropped afterwards.")
    var postgresURL: String?

    @Option(help: .hidden)
    var probe: String?

    @Option(help: .hidden)
    var seconds: Int = 30

    @Flag(help: .hidden)
    var raw = false

    func run() async throws {
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

        let log: @Sendable (String) -> Void = { line in FileHandle.standardError.write(Data((line + "\n").utf8)) }
        let benchmarks = Benchmarks(sizes: quick ? .quick : .full, folder: folderURL, log: log)
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
        let postgresSkipped = try await PostgresBenchmarks.measure(
            url: postgresURL ?? ProcessInfo.processInfo.environment["COUNTDOWN_POSTGRES_URL"], quick: quick, log: log,
            wanted: wanted, add: add)

        print(Report.table(figures))
        if let postgresSkipped { print(postgresSkipped) }
        if let json {
            try Report.json(figures).write(to: URL(fileURLWithPath: json))
        }
        let missed = figures.filter { !$0.meets }.map(\.name)
        if !missed.isEmpty {
            print("targets missed: \(missed.joined(separator: ", "))" + (quick ? " (quick sizes: not judged)" : ""))
        }
    }
}
