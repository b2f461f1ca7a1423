import Foundation

/// A process the benchmark starts (`countdown run`, a writer or reader of its own), in a process
/// group of its own so that it and anything it starts are killed together, with
/// `SWIFT_BACKTRACE=enable=no`, its stderr in a file (quoted when it fails) and, when asked, a
/// pipe on its stdin (closing it asks a helper to stop) and one on its stdout, read on a thread
/// of its own. It is spawned and reaped directly (`posix_spawn`, `waitpid`), and every wait for
/// it is bounded.
final class Child: @unchecked Sendable {
    // `@unchecked Sendable`: `status` and `stdinFD` are read and written under `lock` only; the rest
    // is constant.
    let pid: pid_t
    /// What was run, for messages.
    let command: String
    let stderrPath: String
    private var stdinFD: Int32
    private let lock = NSLock()
    private var status: Int32?

    /// Starts `executable` with `arguments`. `onOutput` gets each chunk of its stdout with the
    /// instant it was read, on the reading thread, and an empty chunk at the end of the output.
    init(
        _ executable: String, _ arguments: [String], stderrPath: String, stdin: Bool,
        onOutput: (@Sendable (ArraySlice<UInt8>, ContinuousClock.Instant) -> Void)?
    ) throws {
        command = ([(executable as NSString).lastPathComponent] + arguments).joined(separator: " ")
        self.stderrPath = stderrPath
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var input: [Int32] = [-1, -1]
        var output: [Int32] = [-1, -1]
        if stdin {
            try Self.makePipe(&input)
            posix_spawn_file_actions_adddup2(&actions, input[0], 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        if onOutput != nil {
            try Self.makePipe(&output)
            posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        #if canImport(Glibc)
        // No other descriptor of the benchmark reaches the child: a pipe to another child held
        // open here would keep that child from seeing its end. (glibc 2.34 and later; looked up
        // at run time, as Swift does not import it. The pipes are close-on-exec besides.)
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
            _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
        }
        #endif

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // A process group of its own, and the signals the benchmark handles or ignores back to
        // their defaults.
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGINT, SIGTERM, SIGPIPE, SIGHUP] { sigaddset(&defaults, signal) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        for fd in [input[0], output[1]] where fd >= 0 { close(fd) }
        guard spawned == 0 else {
            for fd in [input[1], output[0]] where fd >= 0 { close(fd) }
            throw BenchmarkError("cannot start \(executable): \(String(cString: strerror(spawned)))")
        }
        self.pid = pid
        stdinFD = input[1]
        Children.shared.add(pid)
        if let onOutput {
            let fd = output[0]
            Thread.detachNewThread {
                var buffer = [UInt8](repeating: 0, count: 1 << 16)
                while true {
                    let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                    if count < 0, errno == EINTR { continue }
                    let now = ContinuousClock.now
                    guard count > 0 else { break }
                    onOutput(buffer[0..<count], now)
                }
                close(fd)
                onOutput([], ContinuousClock.now)
            }
        }
    }

    private static func makePipe(_ fds: inout [Int32]) throws {
        guard pipe(&fds) == 0 else { throw BenchmarkError("pipe: \(String(cString: strerror(errno)))") }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
    }

    /// Writes `text` to the child's stdin.
    func write(_ text: String) {
        lock.withLock {
            guard stdinFD >= 0 else { return }
            writeAll(stdinFD, Array(text.utf8))
        }
    }

    /// Closes the child's stdin: a helper takes it as the request to stop.
    func closeInput() {
        lock.withLock {
            if stdinFD >= 0 { close(stdinFD) }
            stdinFD = -1
        }
    }

    /// Sends `signal` to the child alone.
    func signal(_ signal: Int32) {
        if !exited { kill(pid, signal) }
    }

    /// Whether the child has ended (and has been reaped).
    var exited: Bool { reap(block: false) != nil }

    /// The wait status once the child has ended, reaping it; nil while it runs.
    @discardableResult
    private func reap(block: Bool) -> Int32? {
        lock.withLock {
            if let status { return status }
            var raw: Int32 = 0
            let result = waitpid(pid, &raw, block ? 0 : WNOHANG)
            if result == pid || (result < 0 && errno == ECHILD) {
                status = result == pid ? raw : -1
                Children.shared.remove(pid)
            }
            return status
        }
    }

    /// Waits at most `limit` for the child to end; its exit status (128 + the signal when a
    /// signal ended it), or nil when it still runs.
    func wait(upTo limit: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + limit
        while true {
            if let status = reap(block: false) { return Self.exitCode(status) }
            if ContinuousClock.now >= deadline { return nil }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Kills the child's process group and reaps the child.
    func killGroup() {
        guard !exited else { return }
        kill(-pid, SIGKILL)
        kill(pid, SIGKILL)
        reap(block: true)
    }

    /// Asks the child to stop with `signal`, waits at most `limit`, then kills its group; its exit
    /// status (nil when it had to be killed).
    func stop(_ signal: Int32 = SIGTERM, within limit: Duration) async -> Int32? {
        self.signal(signal)
        if let code = await wait(upTo: limit) { return code }
        killGroup()
        return nil
    }

    private static func exitCode(_ status: Int32) -> Int32 {
        if status < 0 { return -1 }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// The end of the child's stderr, for messages.
    var stderrTail: String {
        let text = (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? ""
        let tail = text.trimmingCharacters(in: .whitespacesAndNewlines).suffix(1500)
        return tail.isEmpty ? "(nothing on stderr)" : "stderr: \(tail)"
    }

    /// The child's peak resident memory so far (`VmHWM` of `/proc/PID/status`), in KiB; nil
    /// where there is no such file.
    var peakResidentKiB: Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            return Int(line.dropFirst(6).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
        }
        return nil
    }
}

/// Writes `bytes` to `fd` (a pipe: a child that ended makes it fail, not signal: SIGPIPE is ignored).
private func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    bytes.withUnsafeBytes { buffer in
        var offset = 0
        while offset < buffer.count {
            let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }
}

/// The process groups of the children still running, killed when the benchmark is interrupted
/// (SIGINT, SIGTERM) so that none outlives it.
final class Children: @unchecked Sendable {
    // `@unchecked Sendable`: `pids` is read and written under `lock` only.
    static let shared = Children()
    private let lock = NSLock()
    private var pids: Set<pid_t> = []
    private var sources: [any DispatchSourceSignal] = []

    func add(_ pid: pid_t) {
        lock.withLock {
            pids.insert(pid)
            guard sources.isEmpty else { return }
            // A write to the stdin of a child that ended fails rather than ending the benchmark.
            signal(SIGPIPE, SIG_IGN)
            sources = [SIGINT, SIGTERM].map { number in
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number)
                source.setEventHandler { [self] in
                    for pid in lock.withLock({ pids }) {
                        kill(-pid, SIGKILL)
                        kill(pid, SIGKILL)
                    }
                    FileHandle.standardError.write(Data("interrupted: the benchmark's child processes were killed\n".utf8))
                    exit(128 + number)
                }
                source.resume()
                return source
            }
        }
    }

    func remove(_ pid: pid_t) {
        _ = lock.withLock { pids.remove(pid) }
    }
}
