import CountdownStore
import CountdownStorePostgres
import Foundation
import PostgresNIO

/// What another process did beside a case: how many operations, the longest, and the failures.
struct HelperSummary: Codable {
    var operations: Int
    var longestMs: Double
    var p99Ms: Double
    /// Operations that took more than 50 ms.
    var over50ms: Int
    var failures: Int
    var firstFailure: String?

    /// A helper that did not answer when asked to stop: one failure, waiting at least `ms`.
    static func stuck(_ ms: Double, _ message: String) -> HelperSummary {
        HelperSummary(operations: 0, longestMs: ms, p99Ms: ms, over50ms: 1, failures: 1, firstFailure: message)
    }

    var described: String {
        String(format: "%d operations, longest %.1f ms, p99 %.1f ms, %d over 50 ms, %d failed", operations, longestMs, p99Ms, over50ms, failures)
            + (firstFailure.map { " (first: \($0))" } ?? "")
    }
}

/// The helper process (`--helper write|read --db PATH`): another process using the store beside a
/// case. It opens the store and does its operation three times to warm up (it is started before
/// anything is due: every write records the expiries that are due, work of the case's), prints
/// `ready`, waits for a line on its stdin, then every `interval` either starts a countdown of an
/// hour under a new key (`write`) or reads the countdown `key` (`read`), timing each call on the
/// continuous clock, until its stdin closes (or `limit` passes), and prints a ``HelperSummary``
/// as one JSON line.
///
/// The roles `tool-start` and `tool-show` time whole processes of the `countdown` tool beside
/// this executable instead (`countdown start KEY 1h`, `countdown show KEY --json`), as a shell
/// script sees the store: opening, the call and closing, each a process of its own.
func helper(role: String, db: String, key: String, interval: Duration, limit: Duration) async throws {
    let tag = "w\(getpid())-"
    var index = 0
    var store: CountdownStore?
    func opened() async throws -> CountdownStore {
        if let store { return store }
        let new: CountdownStore
        if db.hasPrefix("postgres://") || db.hasPrefix("postgresql://") {
            new = try await CountdownStore(postgresURL: db, configuration: quietStore)
        } else {
            new = try CountdownStore(path: db, configuration: quietStore)
        }
        store = new
        return new
    }
    let operation: () async throws -> Void
    switch role {
    case "write":
        let store = try await opened()
        operation = {
            index += 1
            try await store.start("\(tag)\(index)", duration: .seconds(3600), group: "writer")
        }
    case "read":
        let store = try await opened()
        operation = { _ = try await store.countdown(key) }
    case "tool-start", "tool-show":
        let tool = try MassSettings.tool()
        let stderrPath = NSTemporaryDirectory() + "countdown-helper-\(getpid()).log"
        operation = {
            index += 1
            let arguments =
                role == "tool-start" ? ["start", "t\(tag)\(index)", "1h", "--group", "writer", "--db", db] : ["show", key, "--json", "--db", db]
            let child = try Child(tool, arguments, stderrPath: stderrPath, stdin: false, onOutput: nil)
            guard let code = await child.wait(upTo: .seconds(30)) else {
                child.killGroup()
                throw BenchmarkError("countdown \(arguments[0]) did not end within 30 s")
            }
            // `show` of a key not started yet (the warm-up) exits 66, an answer like any other.
            guard code == 0 || (role == "tool-show" && code == 66) else { throw BenchmarkError("countdown \(arguments[0]) exited with status \(code): \(child.stderrTail)") }
        }
    default:
        throw BenchmarkError("unknown helper role \(role): write, read, tool-start or tool-show")
    }
    for _ in 0..<3 { try await operation() }

    // A line on stdin starts the work; the end of stdin stops it.
    let go = StopFlag()
    let stop = StopFlag()
    Thread.detachNewThread {
        var byte: UInt8 = 0
        while true {
            let count = read(0, &byte, 1)
            if count < 0, errno == EINTR { continue }
            if count <= 0 { break }
            if byte == UInt8(ascii: "\n") { go.set() }
        }
        stop.set()
        go.set()
    }
    FileHandle.standardOutput.write(Data("ready\n".utf8))
    let end = ContinuousClock.now + limit
    while !go.isSet, ContinuousClock.now < end { try await Task.sleep(for: .milliseconds(1)) }

    var times: [Double] = []
    var failures = 0
    var firstFailure: String?
    while !stop.isSet, ContinuousClock.now < end {
        let start = ContinuousClock.now
        do {
            try await operation()
        } catch {
            failures += 1
            if firstFailure == nil { firstFailure = "\(error)" }
        }
        times.append((ContinuousClock.now - start).seconds * 1e3)
        try await Task.sleep(for: interval)
    }
    try? await store?.close()
    times.sort()
    let summary = HelperSummary(
        operations: times.count, longestMs: times.last ?? 0, p99Ms: percentile(times, 0.99),
        over50ms: times.filter { $0 > 50 }.count, failures: failures, firstFailure: firstFailure)
    FileHandle.standardOutput.write(try JSONEncoder().encode(summary) + Data("\n".utf8))
}

/// The store's settings in the benchmark's processes: errors only on stderr.
let quietStore: CountdownStore.Configuration = {
    var logger = Logger(label: "CountdownStore")
    logger.logLevel = .error
    return CountdownStore.Configuration(logger: logger)
}()

/// A flag one thread sets and others read.
final class StopFlag: @unchecked Sendable {
    // `@unchecked Sendable`: `value` is read and written under `lock` only.
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}

/// Lines of a child's stdout as they arrive, each with the instant it was read.
final class LineCollector: @unchecked Sendable {
    // `@unchecked Sendable`: every property is read and written under `lock` only.
    private let lock = NSLock()
    private var partial: [UInt8] = []
    private var lines: [(String, ContinuousClock.Instant)] = []
    private var ended = false

    func consume(_ bytes: ArraySlice<UInt8>, _ at: ContinuousClock.Instant) {
        lock.withLock {
            if bytes.isEmpty { ended = true }
            partial += bytes
            while let newline = partial.firstIndex(of: UInt8(ascii: "\n")) {
                lines.append((String(decoding: partial[..<newline], as: UTF8.self), at))
                partial.removeSubrange(...newline)
            }
        }
    }

    /// The next line, waiting at most until `deadline`; nil at the end of the output or the deadline.
    func next(before deadline: ContinuousClock.Instant) async -> (String, ContinuousClock.Instant)? {
        while true {
            let (line, over) = lock.withLock { () -> ((String, ContinuousClock.Instant)?, Bool) in
                if !lines.isEmpty { return (lines.removeFirst(), false) }
                return (nil, ended)
            }
            if let line { return line }
            if over || ContinuousClock.now >= deadline { return nil }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }
}

/// A helper process beside a case: started, ready, then stopped with its summary.
struct HelperProcess {
    let child: Child
    let lines: LineCollector
    let role: String

    /// Starts this executable as a helper of `role` on `db` and waits (at most 60 s) until it is ready.
    static func start(role: String, db: String, stderrPath: String) async throws -> HelperProcess {
        let lines = LineCollector()
        let child = try Child(
            benchmarkExecutable(), ["--helper", role, "--db", db], stderrPath: stderrPath, stdin: true,
            onOutput: { lines.consume($0, $1) })
        guard let (line, _) = await lines.next(before: .now + .seconds(60)), line == "ready" else {
            child.killGroup()
            throw BenchmarkError("the \(role) helper was not ready within 60 s; \(child.stderrTail)")
        }
        return HelperProcess(child: child, lines: lines, role: role)
    }

    /// Tells the helper to start working.
    func go() { child.write("go\n") }

    /// Asks the helper to stop and returns what it saw; a helper that does not answer within 30 s
    /// (an operation stuck) is killed and counted as one failure of at least that long.
    func stop() async -> HelperSummary {
        let asked = ContinuousClock.now
        child.closeInput()
        let line = await lines.next(before: asked + .seconds(30))
        let code = await child.wait(upTo: .seconds(5))
        if code == nil { child.killGroup() }
        guard let (text, _) = line, let summary = try? JSONDecoder().decode(HelperSummary.self, from: Data(text.utf8)) else {
            child.killGroup()
            let waited = (ContinuousClock.now - asked).seconds * 1e3
            return .stuck(waited, "the \(role) helper gave no summary when asked to stop; \(child.stderrTail)")
        }
        return summary
    }
}

/// The writer and the reader beside a case, started before anything is due and set going when
/// the case begins.
struct Beside {
    let writer: HelperProcess
    let reader: HelperProcess
    /// Whole `countdown start` and `countdown show` processes, one after another.
    let toolStart: HelperProcess
    let toolShow: HelperProcess

    var all: [HelperProcess] { [writer, reader, toolStart, toolShow] }

    /// Starts the four on `db`; their stderr goes to files named after `tag` in `folder`.
    static func start(db: String, folder: URL, tag: String) async throws -> Beside {
        var started: [HelperProcess] = []
        do {
            for role in ["write", "read", "tool-start", "tool-show"] {
                started.append(
                    try await HelperProcess.start(role: role, db: db, stderrPath: folder.appendingPathComponent("\(role)-\(tag).log").path))
            }
            return Beside(writer: started[0], reader: started[1], toolStart: started[2], toolShow: started[3])
        } catch {
            started.forEach { $0.child.killGroup() }
            throw error
        }
    }

    func go() {
        all.forEach { $0.go() }
    }

    func stop() async -> BesideSummary {
        BesideSummary(writer: await writer.stop(), reader: await reader.stop(), toolStart: await toolStart.stop(), toolShow: await toolShow.stop())
    }

    func kill() {
        all.forEach { $0.child.killGroup() }
    }

    /// Runs `body` with the four started on `db`, killing them when it throws.
    static func with<T>(db: String, folder: URL, tag: String, _ body: (Beside) async throws -> T) async throws -> T {
        let beside = try await start(db: db, folder: folder, tag: tag)
        do {
            return try await body(beside)
        } catch {
            beside.kill()
            throw error
        }
    }
}

/// What the processes beside a case saw.
struct BesideSummary {
    /// A process of the benchmark's own, starting a countdown every 5 ms on a store it keeps open.
    var writer: HelperSummary
    /// The same, reading one countdown.
    var reader: HelperSummary
    /// `countdown start KEY 1h`, a whole process each time.
    var toolStart: HelperSummary
    /// `countdown show KEY --json`, a whole process each time.
    var toolShow: HelperSummary

    var failures: Int { writer.failures + reader.failures + toolStart.failures + toolShow.failures }

    func log(_ side: String, _ log: (String) -> Void) {
        log("  \(side): the writer beside: \(writer.described)")
        log("  \(side): the reader beside: \(reader.described)")
        log("  \(side): countdown start processes beside: \(toolStart.described)")
        log("  \(side): countdown show processes beside: \(toolShow.described)")
    }
}

/// This executable, to start again as a helper or probe.
func benchmarkExecutable() -> String {
    let argument = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.path
    if FileManager.default.isExecutableFile(atPath: argument), argument.hasPrefix("/") { return argument }
    return URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
}
