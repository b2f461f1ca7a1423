import Foundation
import GRDB
import Testing

/// Every suite that starts real processes, run one after another so that none starves another's
/// processes of CPU (a lease holder that cannot heartbeat in time rightly loses its lease).
@Suite("Real processes", .serialized)
struct RealProcesses {}

/// The folder of the built products, beside the test bundle.
let productsFolder: URL = {
    let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    return [directory, directory.deletingLastPathComponent()]
        .first { FileManager.default.isExecutableFile(atPath: $0.appendingPathComponent("CountdownHostExample").path) }
        ?? directory
}()

/// The built host example.
let hostExample = productsFolder.appendingPathComponent("CountdownHostExample")
/// The built reliability helper.
let tortureHelper = productsFolder.appendingPathComponent("CountdownTortureHelper")
/// The built `countdown` tool.
let countdownBinary = productsFolder.appendingPathComponent("countdown")

/// Polls (real time) until `condition` holds; fails the test after `limit` seconds.
func eventually(_ what: String, limit: Double = 30, _ condition: () async throws -> Bool) async throws {
    let deadline = Date().addingTimeInterval(limit)
    while Date() < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(50))
    }
    Issue.record("timed out waiting until \(what)")
    throw CancellationError()
}

/// ``eventually(_:limit:_:)`` while `process` does the work awaited: when it ends first, the
/// test fails at once with its exit and stderr; when the limit runs out, with the stacks of its
/// threads and its children's (where gdb is installed), then its stderr once it is killed.
func eventually(
    _ what: String, watching process: HelperProcess, limit: Double = 30, _ condition: () async throws -> Bool
) async throws {
    let deadline = Date().addingTimeInterval(limit)
    while Date() < deadline {
        if try await condition() { return }
        if !process.process.isRunning {
            // It may have done the work and ended in between.
            if try await condition() { return }
            let lines = await process.finish(limit: 5, status: nil)
            Issue.record(
                "\(process.name) ended (\(process.ending)) before \(what); stdout: \(lines.suffix(10)); stderr: \(process.stderr.suffix(2000))")
            throw CancellationError()
        }
        try await Task.sleep(for: .milliseconds(50))
    }
    let stacks = process.threadStacks()
    killGroup(process.process.processIdentifier)
    let lines = await process.finish(limit: 5, status: nil)
    Issue.record(
        "timed out waiting until \(what); \(process.name) killed. Its threads: \(stacks.suffix(6000)); stdout: \(lines.suffix(10)); stderr: \(process.stderr.suffix(2000))")
    throw CancellationError()
}

/// How big a suite runs: `name` in the environment, else `ci`. The long runs set it high.
func suiteSize(_ name: String, ci: Int) -> Int {
    ProcessInfo.processInfo.environment[name].flatMap(Int.init) ?? ci
}

/// Whether a failing property-based test shrinks its input: only with `COUNTDOWN_SHRINK=1`. A
/// shrink re-runs the whole sequence for every candidate (on PostgreSQL, a fresh schema each), for
/// as long as candidates keep failing: far beyond any test's bound. A failure prints its input
/// and how to replay it instead.
let shrinkFailures = ProcessInfo.processInfo.environment["COUNTDOWN_SHRINK"] == "1"

/// A seeded generator, so a failing run can be replayed with the seed it prints.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The environment of every process the suites start: Swift's backtracer off, so that a process
/// that dies of a fatal error ends at once instead of leaving a backtracer behind that keeps its
/// output open; and no `COUNTDOWN_DB` of the machine's own.
func helperEnvironment(_ extra: [String: String] = [:]) -> [String: String] {
    var environment = ProcessInfo.processInfo.environment
    environment["SWIFT_BACKTRACE"] = "enable=no"
    environment.removeValue(forKey: "COUNTDOWN_DB")
    environment.removeValue(forKey: "COLUMNS")  // the tool fits its tables to it
    // A test run under systemd: its socket and watchdog are not the helpers' to speak to.
    for name in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] { environment.removeValue(forKey: name) }
    for (key, value) in extra { environment[key] = value }
    return environment
}

/// Sends `signal` to the process group `group` (Foundation's `Process` starts each child in a
/// group of its own, whose id is the child's pid).
func killGroup(_ group: Int32, _ signal: Int32 = SIGKILL) {
    #if canImport(Glibc)
    _ = Glibc.kill(-group, signal)
    #else
    _ = Darwin.kill(-group, signal)
    #endif
}

/// A helper process whose output is collected into lines and whose stderr is kept for reports.
///
/// Plain threads read the pipes to their end with blocking reads: `FileHandle.readabilityHandler`
/// (a dispatch source) can crash libdispatch on Linux when its descriptor closes under it. Every
/// wait is bounded: a helper that hangs is killed with its whole process group and the test
/// fails with its stderr; one that dies by itself where it should not fails the test the same way.
final class HelperProcess: @unchecked Sendable {
    // Safe: `output` and `errors` are written by the reader threads and read only after their
    // semaphores are signalled.
    let process = Process()
    private let pipe = Pipe()
    private let errorPipe = Pipe()
    private var output = Data()
    private var errors = Data()
    private let done = DispatchSemaphore(value: 0)
    private let errorsDone = DispatchSemaphore(value: 0)
    /// How the process is named in failures.
    let name: String
    /// Whether this test sent the process SIGKILL itself (then its death is expected).
    private(set) var killedOnPurpose = false

    /// `directory`: where the process runs (default: this process's folder).
    init(
        _ arguments: [String], executable: URL = tortureHelper, shell: String? = nil, environment: [String: String] = [:],
        directory: URL? = nil
    ) throws {
        if let directory { process.currentDirectoryURL = directory }
        if let shell {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", shell + " \"$0\" \"$@\"", executable.path] + arguments
        } else {
            process.executableURL = executable
            process.arguments = arguments
        }
        name = ([executable.lastPathComponent] + arguments.prefix(3)).joined(separator: " ")
        process.environment = helperEnvironment(environment)
        process.standardOutput = pipe
        process.standardError = errorPipe
        try process.run()
        let reading = pipe.fileHandleForReading
        let readingErrors = errorPipe.fileHandleForReading
        // Each reader closes its end at EOF: left to the `Process` and its pipes, two descriptors
        // per finished process stayed open, and a long run piled up hundreds of them.
        Thread.detachNewThread { [self] in
            output = reading.readDataToEndOfFile()
            try? reading.close()
            done.signal()
        }
        Thread.detachNewThread { [self] in
            errors = readingErrors.readDataToEndOfFile()
            try? readingErrors.close()
            errorsDone.signal()
        }
    }

    func kill(_ signal: Int32 = SIGKILL) {
        if signal == SIGKILL { killedOnPurpose = true }
        #if canImport(Glibc)
        _ = Glibc.kill(process.processIdentifier, signal)
        #else
        _ = Darwin.kill(process.processIdentifier, signal)
        #endif
    }

    /// How the process ended, in words.
    var ending: String {
        if process.isRunning { return "still running" }
        return signalled.map { "signal \($0)" } ?? "exit status \(process.terminationStatus)"
    }

    /// The stacks of the threads of the process and of every process below it, from gdb (empty
    /// without gdb), for a report of a hang.
    func threadStacks() -> String {
        let gdb = "/usr/bin/gdb"
        guard FileManager.default.isExecutableFile(atPath: gdb) else { return "" }
        var pids = [process.processIdentifier]
        var index = 0
        while index < pids.count, pids.count < 16 {
            let pid = pids[index]
            let children = (try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)) ?? ""
            pids += children.split(separator: " ").compactMap { Int32($0) }
            index += 1
        }
        return pids.map { pid in
            let dump = try? HelperProcess.run(
                URL(fileURLWithPath: gdb), ["-p", "\(pid)", "-batch", "-ex", "thread apply all bt 12"], limit: 60)
            return "pid \(pid): \(dump?.stdout ?? "gdb failed")"
        }.joined(separator: "\n")
    }

    /// Whether the process ended by a signal, and which.
    var signalled: Int32? {
        process.isRunning || process.terminationReason != .uncaughtSignal ? nil : process.terminationStatus
    }

    /// What the process wrote on stderr (complete once ``finish(limit:status:)`` returned).
    var stderr: String { String(decoding: errors, as: UTF8.self) }

    /// What the process wrote on stdout (complete once ``finish(limit:status:)`` returned).
    var stdout: String { String(decoding: output, as: UTF8.self) }

    /// Runs `executable` to completion, at most `limit` seconds (then it is killed with its process
    /// group and the test fails), whatever its exit status.
    static func run(
        _ executable: URL, _ arguments: [String], environment: [String: String] = [:], limit: Double = 60
    ) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = try HelperProcess(arguments, executable: executable, environment: environment)
        _ = process.finishNow(limit: limit, status: nil)
        return (process.process.terminationStatus, process.stdout, process.stderr)
    }

    /// How the wait for the end of the process went.
    private struct Ending: Sendable {
        /// The output did not end within the limit: the group was killed.
        var outputTimedOut = false
        /// The output ended but the process did not exit within 10 s: the group was killed.
        var exitTimedOut = false
    }

    /// Waits at most `limit` seconds for the output to end (EOF once the process is dead), then
    /// returns its complete lines. A process still writing then is killed with its whole group,
    /// and the test fails naming it, with its stderr. A process that ended otherwise than by
    /// exit status `status` (a fatal error, a signal this test did not send) fails the test too;
    /// `nil` accepts any end.
    ///
    /// The blocking waits run on a thread of their own, never on the tasks' shared threads: on a
    /// machine of two cores, two tests blocked there would stall every other test of the process.
    func finish(limit: Double = 30, status: Int32? = 0) async -> [String] {
        let ending = await onThread { self.waitForEnd(limit: limit) }
        return conclude(ending, limit: limit, status: status)
    }

    /// ``finish(limit:status:)`` on the calling thread, for the short runs of ``run(_:_:environment:limit:)``.
    func finishNow(limit: Double = 30, status: Int32? = 0) -> [String] {
        conclude(waitForEnd(limit: limit), limit: limit, status: status)
    }

    /// The blocking waits of ``finish(limit:status:)``. Foundation's own notice of the exit is
    /// awaited only briefly, because under heavy process churn `waitUntilExit` can miss it and
    /// wait forever.
    private func waitForEnd(limit: Double) -> Ending {
        var ending = Ending()
        if done.wait(timeout: .now() + limit) == .timedOut {
            ending.outputTimedOut = true
            killGroup(process.processIdentifier)
            _ = done.wait(timeout: .now() + 5)
            _ = errorsDone.wait(timeout: .now() + 5)
        }
        _ = errorsDone.wait(timeout: .now() + 5)
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        if process.isRunning {
            ending.exitTimedOut = true
            killGroup(process.processIdentifier)
        }
        return ending
    }

    /// Records what went wrong in the test's own task, and returns the complete lines.
    private func conclude(_ ending: Ending, limit: Double, status: Int32?) -> [String] {
        if ending.outputTimedOut {
            Issue.record("\(name): its output did not end within \(Int(limit)) s; killed with its process group. stderr: \(stderr.suffix(2000))")
        }
        if ending.exitTimedOut {
            Issue.record("\(name): its output ended but it did not exit within 10 s; killed with its process group. stderr: \(stderr.suffix(2000))")
        } else if let status {
            let exitedAsExpected = process.terminationReason == .exit && process.terminationStatus == status
            let killedByThisTest = killedOnPurpose && signalled == SIGKILL
            if !exitedAsExpected, !killedByThisTest {
                Issue.record("\(name) died by itself (\(self.ending), expected exit status \(status)); stderr: \(stderr.suffix(2000))")
            }
        }
        let text = String(decoding: output, as: UTF8.self)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if !text.hasSuffix("\n") { lines.removeLast() }  // a line cut short by SIGKILL
        return lines.filter { !$0.isEmpty }
    }

    /// Waits at most `seconds` (real time) for the process to end by itself with exit status `status`.
    func waitForExit(seconds: Double, status: Int32? = 0) async throws -> [String] {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        if process.isRunning {
            killGroup(process.processIdentifier)
            Issue.record("\(name) did not finish within \(Int(seconds)) s; killed with its process group. stderr: \(stderr.suffix(2000))")
            return await finish(status: nil)
        }
        return await finish(status: status)
    }
}

/// Whether `count` countdowns have expired and each of `consumers` has acknowledged the last expiry.
func expiredAndDelivered(_ reader: DatabaseQueue, count: Int, consumers: [String]) throws -> Bool {
    try reader.read { db in
        let expired = try Int.fetchOne(db, sql: "SELECT count(*) FROM countdowns WHERE state = 'expired'") ?? 0
        let last = try Int64.fetchOne(db, sql: "SELECT max(id) FROM countdown_events WHERE kind = 'expired'") ?? 0
        let caughtUp = try consumers.filter { name in
            (try Int64.fetchOne(db, sql: "SELECT last_event_id FROM countdown_consumers WHERE name = ?", arguments: [name]) ?? -1) >= last
        }
        return expired == count && caughtUp.count == consumers.count
    }
}

/// A read-only connection for checking a database the processes wrote.
func readOnly(_ path: String) throws -> DatabaseQueue {
    var configuration = GRDB.Configuration()
    configuration.readonly = true
    return try DatabaseQueue(path: path, configuration: configuration)
}
