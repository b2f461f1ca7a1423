import Foundation
import Logging
import Testing

@testable import CountdownStoreCore
@testable import countdown

#if canImport(Glibc)
    import Glibc
#endif

/// The watchdog's rule and the log formats, without a process.
@Suite("systemd: the watchdog's rule and the log lines")
struct SystemdRuleTests {
    @Test("The watchdog pings every half interval, only while the ticker's loop went round within half the interval (at least 2 s)")
    func watchdogRule() {
        let rule = WatchdogRule(interval: .seconds(1))
        #expect(rule.pingEvery == .milliseconds(500))
        #expect(rule.stalledAfter == .seconds(2))
        #expect(rule.shouldPing(lastPassAge: .zero))
        #expect(rule.shouldPing(lastPassAge: .milliseconds(1999)))
        #expect(!rule.shouldPing(lastPassAge: .seconds(2)), "a loop stuck for 2 s gets no ping")
        #expect(!rule.shouldPing(lastPassAge: .seconds(60)))
        #expect(!rule.shouldPing(lastPassAge: nil), "no ping while the ticker is not running")

        let long = WatchdogRule(interval: .seconds(30))
        #expect(long.pingEvery == .seconds(15) && long.stalledAfter == .seconds(15))
        #expect(long.shouldPing(lastPassAge: .seconds(14)) && !long.shouldPing(lastPassAge: .seconds(15)))
    }

    @Test("The watchdog is the process's when WATCHDOG_USEC is set and WATCHDOG_PID is unset or its own; NOTIFY_SOCKET unset or empty sends nothing")
    func watchdogFromEnvironment() {
        #expect(WatchdogRule(environment: ["WATCHDOG_USEC": "1000000"], pid: 42) == WatchdogRule(interval: .seconds(1)))
        #expect(WatchdogRule(environment: ["WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "42"], pid: 42) != nil)
        #expect(WatchdogRule(environment: ["WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "43"], pid: 42) == nil)
        #expect(WatchdogRule(environment: ["WATCHDOG_USEC": "0"], pid: 42) == nil)
        #expect(WatchdogRule(environment: ["WATCHDOG_USEC": "soon"], pid: 42) == nil)
        #expect(WatchdogRule(environment: [:], pid: 42) == nil)

        let unset = SystemdNotifier(environment: ["WATCHDOG_USEC": "1000000"], pid: 42)
        #expect(!unset.isEnabled && unset.watchdog == nil)
        #expect(!SystemdNotifier(environment: ["NOTIFY_SOCKET": ""], pid: 42).isEnabled)
        let set = SystemdNotifier(environment: ["NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "2000000"], pid: 42)
        #expect(set.isEnabled && set.watchdog == WatchdogRule(interval: .seconds(2)))
    }

    @Test("Log lines: journal has the syslog priority and no timestamp, json one object per line, a record is never split")
    func logLines() throws {
        let time = Date(timeIntervalSince1970: 1_790_000_000.25)
        let metadata: Logger.Metadata = ["key": "job", "retry_in": "0.5 seconds"]
        let journal = ToolLogHandler.line(
            format: .journal, level: .warning, label: "countdown", message: "two\nlines", metadata: metadata, time: time)
        #expect(journal == "<4>two\\nlines key=job retry_in=\"0.5 seconds\"\n")
        let priorities = Logger.Level.allCases.map { ToolLogHandler.priority($0) }
        #expect(priorities == [7, 7, 6, 5, 4, 3, 2])

        let text = ToolLogHandler.line(
            format: .text, level: .error, label: "countdown", message: "failed", metadata: [:], time: time)
        #expect(text == "2026-09-21T14:13:20.250Z error countdown: failed\n")

        let json = ToolLogHandler.line(
            format: .json, level: .warning, label: "countdown", message: "a \"quoted\"\nline",
            metadata: metadata, time: time)
        #expect(json.hasSuffix("\n") && json.dropLast().split(separator: "\n").count == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(object["time"] as? String == "2026-09-21T14:13:20.250Z")
        #expect(object["level"] as? String == "warning" && object["label"] as? String == "countdown")
        #expect(object["message"] as? String == "a \"quoted\"\nline")
        #expect(object["metadata"] as? [String: String] == ["key": "job", "retry_in": "0.5 seconds"])
    }

    @Test("auto is journal only when JOURNAL_STREAM names stderr's device and inode")
    func automaticFormat() {
        #expect(LogFormat.auto.resolved(environment: [:]) == .text)
        #expect(LogFormat.auto.resolved(environment: ["JOURNAL_STREAM": "1:2"]) == .text)
        #expect(LogFormat.auto.resolved(environment: ["JOURNAL_STREAM": "nonsense"]) == .text)
        #expect(LogFormat.json.resolved(environment: ["JOURNAL_STREAM": "1:2"]) == .json)
        #if canImport(Glibc)
            var status = stat()
            if fstat(2, &status) == 0 {
                let own = "\(UInt64(status.st_dev)):\(UInt64(status.st_ino))"
                #expect(LogFormat.auto.resolved(environment: ["JOURNAL_STREAM": own]) == .journal)
            }
        #endif
    }
}

#if os(Linux)

    /// A datagram socket playing systemd's part: what a process sends to `$NOTIFY_SOCKET` arrives
    /// here. Reads never block: ``messages`` takes what has arrived so far.
    final class NotifyListener: Sendable {
        /// The value of `$NOTIFY_SOCKET` for it: its path, or `@name` in the abstract namespace.
        let address: String
        private let descriptor: Int32
        private let received = Locked<[String]>([])

        /// A socket at `path`, or, for a name starting with `@`, in Linux's abstract namespace.
        init(_ address: String) throws {
            self.address = address
            descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            var socketAddress = sockaddr_un()
            socketAddress.sun_family = sa_family_t(AF_UNIX)
            var bytes = Array(address.utf8)
            if address.hasPrefix("@") { bytes[0] = 0 }
            withUnsafeMutableBytes(of: &socketAddress.sun_path) { $0.copyBytes(from: bytes) }
            let length = socklen_t(
                (MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path) ?? 2) + bytes.count
                    + (address.hasPrefix("@") ? 0 : 1))
            let bound = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
            }
            guard bound == 0 else {
                let error = errno
                close(descriptor)
                throw POSIXError(.init(rawValue: error) ?? .EIO)
            }
        }

        deinit {
            close(descriptor)
        }

        /// Every message received so far, oldest first.
        var messages: [String] {
            var buffer = [UInt8](repeating: 0, count: 4096)
            var arrived: [String] = []
            while true {
                let count = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                guard count > 0 else { break }
                arrived.append(String(decoding: buffer[..<count], as: UTF8.self))
            }
            return received.withLock { all in
                all += arrived
                return all
            }
        }

        /// How many messages received so far hold the line `line`, after the first `skipping`.
        func count(_ line: String, after skipping: Int = 0) -> Int {
            messages.dropFirst(skipping).filter { $0.split(separator: "\n").contains(Substring(line)) }.count
        }

        /// The index of the first message holding `line`.
        func index(of line: String) -> Int? {
            messages.firstIndex { $0.split(separator: "\n").contains(Substring(line)) }
        }
    }

    extension RealProcesses {
        /// `countdown run` and `countdown serve` under systemd's protocols, played by the test:
        /// `READY=1`, `WATCHDOG=1`, `STOPPING=1` on `$NOTIFY_SOCKET`, and log lines for journald
        /// and for shippers. Every wait is bounded; a process that dies fails the test with its stderr.
        @Suite(
            "countdown under systemd",
            .enabled(if: FileManager.default.isExecutableFile(atPath: countdownBinary.path)))
        struct SystemdTests {
            let folder: TemporaryFolder

            init() throws {
                folder = try TemporaryFolder()
            }

            /// The environment of a tool process: nothing of systemd's unless given.
            func environment(_ extra: [String: String]) -> [String: String] {
                var environment = [
                    "XDG_DATA_HOME": folder.path("xdg"), "NOTIFY_SOCKET": "", "WATCHDOG_USEC": "", "WATCHDOG_PID": "",
                    "JOURNAL_STREAM": "",
                ]
                for (key, value) in extra { environment[key] = value }
                return environment
            }

            /// Starts `countdown --db DB arguments…`.
            func start(
                _ arguments: [String], db: String = "x.sqlite", environment extra: [String: String] = [:],
                shell: String? = nil
            ) throws -> HelperProcess {
                try HelperProcess(
                    ["--db", folder.path(db)] + arguments, executable: countdownBinary, shell: shell,
                    environment: environment(extra))
            }

            /// Runs `countdown --db DB arguments…` to completion.
            @discardableResult
            func countdown(_ arguments: [String], db: String = "x.sqlite") throws -> (
                status: Int32, stdout: String, stderr: String
            ) {
                try HelperProcess.run(countdownBinary, ["--db", folder.path(db)] + arguments, environment: environment([:]))
            }

            /// Waits for `READY=1`, then two `WATCHDOG=1`, then stops `process` with SIGTERM and
            /// waits for `STOPPING=1` and exit status 0.
            func readyWatchdogStopping(_ process: HelperProcess, _ listener: NotifyListener) async throws {
                try await eventually("READY=1 arrived", watching: process, limit: 30) {
                    listener.count("READY=1") >= 1
                }
                let ready = try #require(listener.index(of: "READY=1"))
                let readyMessage = listener.messages[ready]
                #expect(readyMessage.contains("STATUS=ticking; holding the lease"), "\(readyMessage)")
                try await eventually("two WATCHDOG=1 arrived after READY=1", watching: process, limit: 30) {
                    listener.count("WATCHDOG=1", after: ready + 1) >= 2
                }
                #expect(listener.count("STOPPING=1") == 0)
                process.kill(SIGTERM)
                try await eventually("STOPPING=1 arrived", watching: process, limit: 30) {
                    listener.count("STOPPING=1") >= 1
                }
                _ = try await process.waitForExit(seconds: 30, status: 0)
                #expect(listener.count("READY=1") == 1, "READY=1 once: \(listener.messages)")
            }

            @Test("run: READY=1 once the ticker went round, WATCHDOG=1 every half interval, STOPPING=1 on SIGTERM, exit 0")
            func runNotifies() async throws {
                let listener = try NotifyListener(folder.path("notify.sock"))
                let run = try start(
                    ["run"], environment: ["NOTIFY_SOCKET": listener.address, "WATCHDOG_USEC": "1000000"])
                try await readyWatchdogStopping(run, listener)
            }

            @Test("run: the same through a socket in the abstract namespace (@name)")
            func abstractSocket() async throws {
                let listener = try NotifyListener("@countdown-tests-\(UUID().uuidString)")
                let run = try start(
                    ["run"], environment: ["NOTIFY_SOCKET": listener.address, "WATCHDOG_USEC": "1000000"])
                try await readyWatchdogStopping(run, listener)
            }

            @Test("serve: READY=1 only once it listens, WATCHDOG=1, STOPPING=1 on SIGTERM, exit 0")
            func serveNotifies() async throws {
                let listener = try NotifyListener(folder.path("notify.sock"))
                let output = folder.path("serve.out")
                let serve = try start(
                    ["serve", "--port", "0"],
                    environment: ["NOTIFY_SOCKET": listener.address, "WATCHDOG_USEC": "1000000"],
                    shell: "exec >'\(output)'")
                try await eventually("READY=1 arrived", watching: serve, limit: 30) {
                    listener.count("READY=1") >= 1
                }
                let printed = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
                #expect(printed.hasPrefix("countdown serve: http://127.0.0.1:"), "listening before READY=1: \(printed)")
                try await readyWatchdogStopping(serve, listener)
            }

            @Test("WATCHDOG_PID of another process: READY=1 and STOPPING=1, but no WATCHDOG=1")
            func watchdogOfAnotherProcess() async throws {
                let other = try NotifyListener(folder.path("other.sock"))
                let own = try NotifyListener(folder.path("own.sock"))
                // pid 1 is never the tool; the second process, its watchdog its own, paces the wait.
                let notOurs = try start(
                    ["run"], db: "a.sqlite",
                    environment: ["NOTIFY_SOCKET": other.address, "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"])
                let ours = try start(
                    ["run"], db: "b.sqlite", environment: ["NOTIFY_SOCKET": own.address, "WATCHDOG_USEC": "1000000"])
                try await eventually("READY=1 from the process whose watchdog is another's", watching: notOurs) {
                    other.count("READY=1") >= 1
                }
                let pingsSoFar = own.count("WATCHDOG=1")
                // Three pings of the other, half a second apart: a second at least since READY=1.
                try await eventually("three more pings of the process whose watchdog is its own", watching: ours) {
                    own.count("WATCHDOG=1") >= pingsSoFar + 3
                }
                #expect(other.count("WATCHDOG=1") == 0, "\(other.messages)")
                notOurs.kill(SIGTERM)
                ours.kill(SIGTERM)
                try await eventually("STOPPING=1", watching: notOurs) { other.count("STOPPING=1") >= 1 }
                _ = try await notOurs.waitForExit(seconds: 30, status: 0)
                _ = try await ours.waitForExit(seconds: 30, status: 0)
                #expect(other.count("WATCHDOG=1") == 0, "\(other.messages)")
            }

            @Test("Without NOTIFY_SOCKET: run delivers and stops with SIGTERM as before")
            func withoutNotifySocket() async throws {
                #expect(try countdown(["start", "job", "100ms"]).status == 0)
                let run = try start(["run", "--consumer", "plain"], environment: ["WATCHDOG_USEC": "1000000"])
                try await eventually("the expiry was recorded", watching: run) {
                    let shown = try countdown(["show", "job", "--json"])
                    return shown.stdout.contains("\"state\":\"expired\"")
                }
                run.kill(SIGTERM)
                let lines = try await run.waitForExit(seconds: 30, status: 0)
                #expect(lines.contains { $0.contains("\"key\":\"job\"") }, "\(lines)")
            }

            @Test("--exec commands do not inherit NOTIFY_SOCKET, WATCHDOG_USEC or WATCHDOG_PID")
            func execEnvironment() async throws {
                let listener = try NotifyListener(folder.path("notify.sock"))
                let marker = folder.path("exec.log")
                #expect(try countdown(["start", "job", "100ms"]).status == 0)
                let command =
                    "echo \"[${NOTIFY_SOCKET-unset}] [${WATCHDOG_USEC-unset}] [${WATCHDOG_PID-unset}] $COUNTDOWN_KEY\" >> '\(marker)'"
                let run = try start(
                    ["run", "--consumer", "exec", "--exec", command],
                    environment: [
                        "NOTIFY_SOCKET": listener.address, "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "",
                    ])
                try await eventually("the command ran", watching: run) {
                    ((try? String(contentsOfFile: marker, encoding: .utf8)) ?? "").hasSuffix("\n")
                }
                try await eventually("READY=1 arrived", watching: run) { listener.count("READY=1") >= 1 }
                run.kill(SIGTERM)
                _ = try await run.waitForExit(seconds: 30, status: 0)
                let logged = try String(contentsOfFile: marker, encoding: .utf8)
                #expect(logged == "[unset] [unset] [unset] job\n")
            }

            /// Starts `run` whose command fails, so that it logs "command failed; retrying".
            func failingRun(_ arguments: [String], db: String, environment: [String: String] = [:], shell: String? = nil)
                throws -> HelperProcess
            {
                #expect(try countdown(["start", "job", "100ms"], db: db).status == 0)
                return try start(
                    ["run", "--consumer", "c", "--exec", "exit 1"] + arguments, db: db, environment: environment,
                    shell: shell)
            }

            /// The device and inode of `path`, as `$JOURNAL_STREAM` gives them.
            func deviceAndInode(_ path: String) throws -> (device: UInt64, inode: UInt64) {
                var status = stat()
                guard stat(path, &status) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
                return (UInt64(status.st_dev), UInt64(status.st_ino))
            }

            @Test("Under journald (JOURNAL_STREAM names stderr): <N> priorities, no timestamps; a mismatching one: text")
            func journalFormat() async throws {
                for matching in [true, false] {
                    let log = folder.path("stderr-\(matching).log")
                    _ = FileManager.default.createFile(atPath: log, contents: nil)
                    let (device, inode) = try deviceAndInode(log)
                    let stream = matching ? "\(device):\(inode)" : "\(device):\(inode + 1)"
                    let run = try failingRun(
                        ["--log-level", "info"], db: "\(matching).sqlite", environment: ["JOURNAL_STREAM": stream],
                        shell: "exec 2>>'\(log)'")
                    func lines() -> [String] { fileLines(log) }
                    try await eventually("a warning was logged", watching: run) {
                        lines().contains { $0.contains("command failed; retrying") }
                    }
                    run.kill(SIGTERM)
                    _ = try await run.waitForExit(seconds: 30, status: 0)
                    let written = lines()
                    let timestamp = #/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}/#
                    if matching {
                        #expect(written.allSatisfy { $0.wholeMatch(of: #/<[2-7]>.*/#) != nil }, "\(written)")
                        #expect(written.allSatisfy { $0.firstMatch(of: timestamp) == nil }, "\(written)")
                        #expect(written.contains { $0.hasPrefix("<4>command failed; retrying") }, "\(written)")
                        #expect(written.contains { $0.hasPrefix("<6>holding the countdown lease") }, "\(written)")
                        #expect(written.contains { $0.contains("key=job") && $0.contains("status=1") }, "\(written)")
                    } else {
                        #expect(written.allSatisfy { $0.prefixMatch(of: timestamp) != nil }, "\(written)")
                        #expect(written.contains { $0.contains(" warning countdown: command failed; retrying") }, "\(written)")
                        #expect(!written.contains { $0.hasPrefix("<") }, "\(written)")
                    }
                }
            }

            @Test("--log-format json: every stderr line is a JSON object with time, level, label, message and metadata")
            func jsonFormat() async throws {
                let log = folder.path("stderr.log")
                let run = try failingRun(["--log-format", "json"], db: "json.sqlite", shell: "exec 2>>'\(log)'")
                func lines() -> [String] { fileLines(log) }
                try await eventually("a warning was logged", watching: run) {
                    lines().contains { $0.contains("command failed; retrying") }
                }
                run.kill(SIGTERM)
                _ = try await run.waitForExit(seconds: 30, status: 0)
                var warnings = 0
                for line in lines() {
                    let object = try #require(
                        try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
                    #expect(object["level"] is String && object["message"] is String && object["time"] is String)
                    #expect(object["label"] as? String == "countdown")
                    if object["message"] as? String == "command failed; retrying" {
                        warnings += 1
                        #expect(object["level"] as? String == "warning")
                        let metadata = object["metadata"] as? [String: String]
                        #expect(metadata?["key"] == "job" && metadata?["status"] == "1", "\(line)")
                    }
                }
                #expect(warnings >= 1, "\(lines())")
            }

            @Test("--log-format with an unknown value: exit status 64, naming it, before or after the subcommand")
            func badLogFormat() throws {
                let after = try countdown(["list", "--log-format", "bogus"])
                #expect(after.status == 64 && after.stderr.contains("bogus"), "\(after.stderr)")
                let before = try HelperProcess.run(
                    countdownBinary, ["--log-format", "bogus", "--db", folder.path("x.sqlite"), "list"],
                    environment: environment([:]))
                #expect(before.status == 64 && before.stderr.contains("bogus"), "\(before.stderr)")
                let level = try countdown(["list", "--log-level", "loud"])
                #expect(level.status == 64 && level.stderr.contains("loud"), "\(level.stderr)")
                #expect(try countdown(["list", "--log-format", "json", "--log-level", "debug"]).status == 0)
            }
        }
    }

#endif

/// The lines written so far to the file at `path` (none while it does not exist).
private func fileLines(_ path: String) -> [String] {
    ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
}
