import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The readings the time model needs: the system's wall clock, a boot clock that never jumps,
/// and which boot the machine is in.
///
/// The store never sleeps or reads time in any other way, so tests hand it a ``VirtualClock``
/// and move time by hand.
public protocol StoreClock: Sendable {
    /// The system wall clock, in UTC milliseconds since 1970. People and NTP may move it.
    var systemMilliseconds: Int64 { get }
    /// Milliseconds since boot on a clock that counts machine sleep and is never set
    /// (Linux `CLOCK_BOOTTIME`, which `ContinuousClock` reads; `CLOCK_MONOTONIC` on Apple platforms).
    var bootMilliseconds: Int64 { get }
    /// An identifier of the current boot, or `nil` where the platform does not tell.
    /// Two readings of ``bootMilliseconds`` are comparable only within one boot.
    var bootIdentity: String? { get }
    /// Suspends the calling task until ``bootMilliseconds`` reaches `deadline`.
    ///
    /// - Throws: `CancellationError` when the task is cancelled first.
    func sleep(untilBootMilliseconds deadline: Int64) async throws
}

/// A clock that can call back at a boot-clock instant without a task of its own, so that a wait
/// can race a deadline against a change with a single continuation (one thread hand-off on
/// waking, not three).
protocol BootAlarms: StoreClock {
    /// Calls `action` once ``StoreClock/bootMilliseconds`` reaches `deadline` (at once when it
    /// has); the returned closure cancels the alarm if it has not gone off.
    func alarm(atBootMilliseconds deadline: Int64, _ action: @escaping @Sendable () -> Void) -> @Sendable () -> Void
}

/// The real clocks of the machine.
public struct SystemClock: StoreClock, BootAlarms {
    /// Creates the machine's clock.
    public init() {}

    /// The system wall clock (`CLOCK_REALTIME`).
    public var systemMilliseconds: Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }

    /// The boot clock: `CLOCK_BOOTTIME` on Linux, `CLOCK_MONOTONIC` (which counts sleep) on Apple platforms.
    public var bootMilliseconds: Int64 {
        BootSleeper.bootNanoseconds() / 1_000_000
    }

    /// Sleeps until the boot clock reaches `deadline`, measured on the boot clock alone, never on
    /// a wall-clock difference (and not through libdispatch's timers; see `BootSleeper`).
    public func sleep(untilBootMilliseconds deadline: Int64) async throws {
        try await BootSleeper.shared.sleep(untilBootNanoseconds: deadline * 1_000_000)
    }

    func alarm(atBootMilliseconds deadline: Int64, _ action: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
        let id = BootSleeper.shared.schedule(atBootNanoseconds: deadline * 1_000_000, action)
        return { BootSleeper.shared.cancel(id) }
    }

    /// The kernel's boot identifier: `/proc/sys/kernel/random/boot_id` on Linux,
    /// `kern.bootsessionuuid` on Apple platforms.
    public var bootIdentity: String? { Self.currentBoot }

    private static let currentBoot: String? = {
        #if os(Linux) || os(Android)
            guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) else {
                return nil
            }
            let id = text.trimmingCharacters(in: .whitespacesAndNewlines)
            return id.isEmpty ? nil : id
        #elseif canImport(Darwin)
            var size = 0
            guard sysctlbyname("kern.bootsessionuuid", nil, &size, nil, 0) == 0, size > 0 else { return nil }
            var buffer = [CChar](repeating: 0, count: size)
            guard sysctlbyname("kern.bootsessionuuid", &buffer, &size, nil, 0) == 0 else { return nil }
            return String(cString: buffer)
        #else
            return nil
        #endif
    }()
}
