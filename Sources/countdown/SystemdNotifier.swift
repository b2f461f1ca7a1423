import CountdownStore
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// systemd's notification protocol (sd_notify(3)) without libsystemd: datagrams such as
/// `READY=1\nSTATUS=…` sent to the AF_UNIX socket named by `$NOTIFY_SOCKET` (a leading `@`
/// names one in Linux's abstract namespace).
///
/// Without `$NOTIFY_SOCKET` (not started by systemd as `Type=notify`, or not on Linux) every
/// call does nothing. A socket that cannot be reached never fails the process: the first failure
/// is logged as a warning, later ones are not.
final class SystemdNotifier: Sendable {
    /// `$NOTIFY_SOCKET` as given, or nil when unset or empty.
    let socketPath: String?
    /// The watchdog asked for (`$WATCHDOG_USEC`, when `$WATCHDOG_PID` is unset or this process).
    let watchdog: WatchdogRule?
    /// The socket, opened at the first message, and whether a failure was logged.
    private let state = Locked<(descriptor: Int32?, warned: Bool)>((nil, false))

    /// The variables systemd passes to the main process alone, which its children must not inherit
    /// (a child would otherwise speak for the service).
    static let variables = ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"]

    /// The notifier of this process, from its environment.
    static let shared = SystemdNotifier(environment: ProcessInfo.processInfo.environment, pid: getpid())

    /// A notifier for a process `pid` with `environment`.
    init(environment: [String: String], pid: Int32) {
        let path = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        socketPath = path
        watchdog = path == nil ? nil : WatchdogRule(environment: environment, pid: pid)
    }

    deinit {
        if let descriptor = state.withLock({ $0.descriptor }) { _ = close(descriptor) }
    }

    /// Whether messages are sent at all.
    var isEnabled: Bool { socketPath != nil }

    /// Sends `fields` as one message (`KEY=value` lines), in their order.
    func notify(_ fields: KeyValuePairs<String, String>) {
        notify(fields.map { "\($0.key)=\($0.value)" }.joined(separator: "\n"))
    }

    /// Says that the process is stopping (`STOPPING=1`): on SIGTERM or SIGINT, before anything
    /// else of the stop.
    func notifyStopping() {
        notify(["STOPPING": "1", "STATUS": "stopping"])
    }

    /// Sends `message` as it is.
    func notify(_ message: String) {
        guard let socketPath else { return }
        if let failure = send(message, to: socketPath) {
            let first = state.withLock { state in
                defer { state.warned = true }
                return !state.warned
            }
            if first {
                toolLogger.warning(
                    "cannot notify systemd; going on without it",
                    metadata: ["socket": "\(socketPath)", "error": "\(failure)"])
            }
        }
    }

    /// One line for `STATUS=`: newlines would end the field.
    static func status(_ text: String) -> String {
        text.replacingOccurrences(of: "\n", with: " ")
    }

    #if canImport(Glibc)
        /// Sends `message` to `path`; the failure in words, or nil when it was sent.
        private func send(_ message: String, to path: String) -> String? {
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            var bytes = Array(path.utf8)
            let abstract = bytes.first == UInt8(ascii: "@")
            if abstract { bytes[0] = 0 }
            let capacity = MemoryLayout.size(ofValue: address.sun_path)
            // A path needs room for its terminating NUL; an abstract name counts only its bytes.
            guard bytes.count + (abstract ? 0 : 1) <= capacity, bytes.count > 1 || !abstract,
                abstract || bytes.first == UInt8(ascii: "/")
            else {
                return "not a socket address: \(path)"
            }
            withUnsafeMutableBytes(of: &address.sun_path) { sunPath in
                sunPath.copyBytes(from: bytes)
            }
            let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path) ?? 2
            let length = socklen_t(pathOffset + bytes.count + (abstract ? 0 : 1))
            let descriptor: Int32
            switch openSocket() {
            case .success(let opened): descriptor = opened
            case .failure(let error): return error.message
            }
            let payload = Array(message.utf8)
            // Never blocking: a full socket drops the message (and is logged) rather than stall a thread.
            let flags = Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)
            let sent = payload.withUnsafeBytes { buffer in
                withUnsafePointer(to: &address) { pointer in
                    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                        sendto(descriptor, buffer.baseAddress, buffer.count, flags, socketAddress, length)
                    }
                }
            }
            if sent < 0 { return String(cString: strerror(errno)) }
            return nil
        }

        /// The datagram socket, opened once (close-on-exec: `--exec` commands do not inherit it).
        private func openSocket() -> Result<Int32, SocketFailure> {
            state.withLock { state in
                if let descriptor = state.descriptor { return .success(descriptor) }
                let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                guard descriptor >= 0 else { return .failure(SocketFailure(message: String(cString: strerror(errno)))) }
                state.descriptor = descriptor
                return .success(descriptor)
            }
        }

        private struct SocketFailure: Error {
            let message: String
        }
    #else
        /// Not on Linux: systemd does not run there, nothing is sent.
        private func send(_ message: String, to path: String) -> String? { nil }
    #endif
}

/// When the tool pings systemd's watchdog (`WATCHDOG=1`): every half of `$WATCHDOG_USEC`, and
/// only while the ticker's loop goes round, so that systemd restarts a process whose ticker hangs.
///
/// The loop begins a pass at least once a second while idle (``CountdownTicker/lastPassAge``); a
/// loop that has not begun one for half the watchdog interval, or 2 s if that is longer, counts as
/// stuck, and the pings stop: systemd then ends the process once the interval has passed since the
/// last one. A ticker not running (before its start, after its stop) gets no pings either.
struct WatchdogRule: Equatable {
    /// `$WATCHDOG_USEC`: how long systemd waits for a ping.
    let interval: Duration

    /// The rule for `interval`.
    init(interval: Duration) {
        self.interval = interval
    }

    /// The rule `environment` asks for: `$WATCHDOG_USEC` above zero, and `$WATCHDOG_PID` unset
    /// or `pid`; nil otherwise.
    init?(environment: [String: String], pid: Int32) {
        guard let text = environment["WATCHDOG_USEC"], let usec = UInt64(text), usec > 0 else { return nil }
        if let owner = environment["WATCHDOG_PID"], !owner.isEmpty, Int32(owner) != pid { return nil }
        interval = .microseconds(Int64(clamping: usec))
    }

    /// How often a ping is sent: half the interval.
    var pingEvery: Duration { interval / 2 }

    /// The loop's age at which it counts as stuck: half the interval, at least 2 s.
    var stalledAfter: Duration { max(interval / 2, .seconds(2)) }

    /// Whether to ping now, given how long ago the ticker's loop began its last pass (nil: not running).
    func shouldPing(lastPassAge: Duration?) -> Bool {
        guard let lastPassAge else { return false }
        return lastPassAge < stalledAfter
    }
}

/// What the tool tells systemd while its ticker runs: `READY=1` once the ticker's loop has done
/// its first pass (and `isReady` holds), `STATUS=` whenever the lease changes hands, and
/// `WATCHDOG=1` as ``WatchdogRule`` says. Runs until cancelled.
struct SystemdSupervision: Sendable {
    let notifier: SystemdNotifier
    let ticker: CountdownTicker
    /// What else must be ready before `READY=1` (`serve`: the server listening).
    var isReady: @Sendable () -> Bool = { true }

    /// How often the ticker's state is looked at.
    static let pollMs: Int64 = 100

    /// The `STATUS=` text for a lease.
    static func status(_ lease: CountdownStore.LeaseStatus?) -> String {
        switch lease {
        case .held?: "ticking; holding the lease"
        case .heldElsewhere?: "standing by; another process holds the lease"
        default: "starting"
        }
    }

    /// Sends the messages until the task is cancelled (then throws `CancellationError`).
    func run() async throws {
        guard notifier.isEnabled else {
            // Nothing to say: wait for the cancellation like the tasks beside it.
            while true {
                let clock = SystemClock()
                try await clock.sleep(untilBootMilliseconds: clock.bootMilliseconds + 3_600_000)
            }
        }
        let clock = SystemClock()
        var ready = false
        var lastStatus: String?
        var nextPing = Int64.min
        let pingMs = notifier.watchdog.map { max(1, milliseconds($0.pingEvery)) }
        while true {
            let now = clock.bootMilliseconds
            if !ready, ticker.completedPasses > 0, isReady() {
                ready = true
                lastStatus = Self.status(ticker.leaseStatus)
                notifier.notify(["READY": "1", "STATUS": lastStatus!])
            } else if ready {
                let status = Self.status(ticker.leaseStatus)
                if status != lastStatus {
                    lastStatus = status
                    notifier.notify(["STATUS": status])
                }
            }
            if let rule = notifier.watchdog, let pingMs, now >= nextPing {
                if rule.shouldPing(lastPassAge: ticker.lastPassAge) {
                    notifier.notify(["WATCHDOG": "1"])
                    nextPing = now + pingMs
                }
            }
            var wake = now + Self.pollMs
            if pingMs != nil, nextPing > now { wake = min(wake, nextPing) }
            try await clock.sleep(untilBootMilliseconds: wake)
        }
    }
}
