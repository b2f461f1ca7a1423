import CCountdownSystem
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Sleeps on the boot clock with one thread of its own, waiting in `poll(2)` with a relative
/// timeout and finishing the last fraction of a millisecond in `nanosleep(2)`.
///
/// `Task.sleep` goes through libdispatch's timers, which misbehave when a process's view of the
/// wall clock is shifted (libfaketime, used to test clock edits, makes them spin or fire an hour
/// late); relative timeouts measured against the boot clock do not depend on the wall clock at all.
final class BootSleeper: @unchecked Sendable {
    // Safe: every mutable property is reached only under `lock`; the pipe is Sendable.
    static let shared = BootSleeper()

    private let lock = NSLock()
    /// Each sleeper's deadline and what to do then: `fire(true)` when it comes, `fire(false)` when cancelled.
    private var sleepers: [UInt64: (deadlineNs: Int64, fire: @Sendable (Bool) -> Void)] = [:]
    private var nextID: UInt64 = 0
    private let pipe = WakePipe()

    private init() {
        let thread = Thread { [unowned self] in self.run() }
        thread.name = "CountdownStore.BootSleeper"
        thread.start()
    }

    /// Nanoseconds on the boot clock.
    static func bootNanoseconds() -> Int64 {
        var spec = timespec()
        #if os(Linux) || os(Android)
            clock_gettime(CLOCK_BOOTTIME, &spec)
        #else
            clock_gettime(CLOCK_MONOTONIC, &spec)
        #endif
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }

    /// Suspends until the boot clock reaches `deadlineNs`, or throws `CancellationError`.
    func sleep(untilBootNanoseconds deadlineNs: Int64) async throws {
        let id = lock.withLock {
            nextID += 1
            return nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let cancelled = lock.withLock { () -> Bool in
                    if Task.isCancelled { return true }
                    sleepers[id] = (
                        deadlineNs,
                        { @Sendable reached in
                            continuation.resume(with: reached ? .success(()) : .failure(CancellationError()))
                        }
                    )
                    return false
                }
                if cancelled {
                    continuation.resume(throwing: CancellationError())
                } else {
                    wake()
                }
            }
        } onCancel: {
            let sleeper = lock.withLock { sleepers.removeValue(forKey: id) }
            sleeper?.fire(false)
        }
    }

    /// Calls `action` on the sleeper's thread once the boot clock reaches `deadlineNs`, unless
    /// ``cancel(_:)`` comes first. Returns the alarm's identifier.
    func schedule(atBootNanoseconds deadlineNs: Int64, _ action: @escaping @Sendable () -> Void) -> UInt64 {
        let id = lock.withLock {
            nextID += 1
            sleepers[nextID] = (deadlineNs, { @Sendable reached in if reached { action() } })
            return nextID
        }
        wake()
        return id
    }

    /// Cancels an alarm of ``schedule(atBootNanoseconds:_:)`` that has not gone off.
    func cancel(_ id: UInt64) {
        lock.withLock { _ = sleepers.removeValue(forKey: id) }
    }

    private func wake() {
        pipe.poke()
    }

    private func run() {
        // Linux lets a timed wait of an ordinary thread end up to 50 µs late (its timer slack), to
        // batch wake-ups; this thread wakes the ticker at deadlines, so it asks for none.
        _ = countdown_precise_timer_slack()
        while true {
            let now = Self.bootNanoseconds()
            let (due, next) = lock.withLock { () -> ([@Sendable (Bool) -> Void], Int64?) in
                let ready = sleepers.filter { $0.value.deadlineNs <= now }
                ready.keys.forEach { sleepers.removeValue(forKey: $0) }
                return (ready.values.map(\.fire), sleepers.values.map(\.deadlineNs).min())
            }
            due.forEach { $0(true) }
            guard let next else {
                pipe.wait(timeoutMs: -1)
                continue
            }
            let remaining = next - now
            if remaining < 1_000_000 {
                // The last fraction of a millisecond, more finely than poll can.
                var spec = timespec(tv_sec: 0, tv_nsec: Int(remaining))
                nanosleep(&spec, nil)
            } else {
                pipe.wait(timeoutMs: Int32(min(remaining / 1_000_000, 1000)))  // or a new sleeper
            }
        }
    }
}
