import Foundation
import GRDB
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
func eventually(_ what: String, limit: Double = 30, _ condition: () throws -> Bool) async throws {
    let deadline = Date().addingTimeInterval(limit)
    while Date() < deadline {
        if try condition() { return }
        try await Task.sleep(for: .milliseconds(50))
    }
    Issue.record("timed out waiting until \(what)")
    throw CancellationError()
}

/// How big a suite runs: `name` in the environment, else `ci`. The long runs set it high.
func suiteSize(_ name: String, ci: Int) -> Int {
    ProcessInfo.processInfo.environment[name].flatMap(Int.init) ?? ci
}

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

/// A helper process whose output is collected into lines.
///
/// A plain thread reads the pipe to its end with blocking reads: `FileHandle.readabilityHandler`
/// (a dispatch source) can crash libdispatch on Linux when its descriptor closes under it.
final class HelperProcess: @unchecked Sendable {
    // Safe: `output` is written by the reader thread and read only after `done` is signalled.
    let process = Process()
    private let pipe = Pipe()
    private var output = Data()
    private let done = DispatchSemaphore(value: 0)

    init(_ arguments: [String], executable: URL = tortureHelper, shell: String? = nil) throws {
        if let shell {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", shell + " \"$0\" \"$@\"", executable.path] + arguments
        } else {
            process.executableURL = executable
            process.arguments = arguments
        }
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let reading = pipe.fileHandleForReading
        Thread.detachNewThread { [self] in
            output = reading.readDataToEndOfFile()
            done.signal()
        }
    }

    func kill(_ signal: Int32 = SIGKILL) {
        #if canImport(Glibc)
        _ = Glibc.kill(process.processIdentifier, signal)
        #else
        _ = Darwin.kill(process.processIdentifier, signal)
        #endif
    }

    /// Sends `signal` to the process's children (a wrapper such as `faketime` forks its command).
    func killChildren(_ signal: Int32) {
        let pid = process.processIdentifier
        let children = (try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)) ?? ""
        for child in children.split(separator: " ").compactMap({ Int32($0) }) {
            #if canImport(Glibc)
            _ = Glibc.kill(child, signal)
            #else
            _ = Darwin.kill(child, signal)
            #endif
        }
    }

    /// Waits for the process to end, then returns its complete lines.
    ///
    /// The end of the output (EOF once the process is dead) is what is waited for; Foundation's
    /// own notice of the exit is awaited only briefly, because under heavy process churn
    /// `waitUntilExit` can miss it and wait forever.
    func finish() -> [String] {
        if done.wait(timeout: .now() + 60) == .timedOut {
            Issue.record("the helper's output did not end within 60 s")
        }
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        let text = String(decoding: output, as: UTF8.self)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if !text.hasSuffix("\n") { lines.removeLast() }  // a line cut short by SIGKILL
        return lines.filter { !$0.isEmpty }
    }

    /// Waits at most `seconds` (real time) for the process to end by itself.
    func waitForExit(seconds: Double) async throws -> [String] {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        if process.isRunning {
            kill()
            Issue.record("the helper did not finish within \(seconds) s")
        }
        return finish()
    }
}

/// A read-only connection for checking a database the processes wrote.
func readOnly(_ path: String) throws -> DatabaseQueue {
    var configuration = GRDB.Configuration()
    configuration.readonly = true
    return try DatabaseQueue(path: path, configuration: configuration)
}
