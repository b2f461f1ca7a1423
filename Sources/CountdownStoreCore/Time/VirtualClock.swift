import Foundation

/// A clock that moves only when told: for tests of anything that depends on time.
///
/// ```swift
/// let clock = VirtualClock()
/// let store = try CountdownStore(path: path, configuration: .init(clock: clock))
/// try await store.start("otp", duration: .seconds(30))
/// clock.advance(by: .seconds(10))              // 10 s pass on every clock
/// clock.moveSystemClock(by: .seconds(-3600))   // someone sets the wall clock back an hour
/// let otp = try await store.countdown("otp")   // remaining: 20 s; the edit changed nothing
/// ```
///
/// ``reboot(after:uptime:)`` plays a machine that is off for a while and boots again. A
/// ``CountdownTicker`` on the store sleeps on the virtual boot clock; after moving the clock,
/// ``CountdownTicker/waitUntilIdle()`` waits until the ticker has handled it.
public final class VirtualClock: StoreClock, BootAlarms, @unchecked Sendable {
    // Safe: every stored property is read and written under `lock`.
    private let lock = NSLock()
    private var system: Int64
    private var boot: Int64
    private var bootID: String?
    private var boots = 0
    /// Each sleeper's deadline and what to do then: `fire(true)` when it comes, `fire(false)` when cancelled.
    private var sleepers: [UInt64: (deadline: Int64, fire: @Sendable (Bool) -> Void)] = [:]
    private var nextSleeper: UInt64 = 0

    /// A clock whose wall clock reads `start` and whose boot clock reads `uptime`.
    public init(
        start: Date = Date(timeIntervalSince1970: 1_795_000_000),
        uptime: Duration = .seconds(1000),
        bootIdentity: String? = "virtual-boot-0"
    ) {
        system = start.millisecondsSince1970
        boot = uptime.milliseconds
        bootID = bootIdentity
    }

    /// The virtual wall clock, in UTC milliseconds since 1970.
    public var systemMilliseconds: Int64 { lock.withLock { system } }
    /// The virtual boot clock, in milliseconds.
    public var bootMilliseconds: Int64 { lock.withLock { boot } }
    /// The virtual boot's identifier.
    public var bootIdentity: String? { lock.withLock { bootID } }

    /// Lets real time pass: the wall clock and the boot clock both move forward by `duration`,
    /// and every sleeper whose deadline has come is woken.
    public func advance(by duration: Duration) {
        let woken = lock.withLock {
            system += duration.milliseconds
            boot += duration.milliseconds
            return takeSleepers { $0 <= boot }
        }
        woken.forEach { $0() }
    }

    /// How many sleepers and alarms wait for the boot clock to move: for tests that must know a
    /// task is waiting before they move it.
    var sleeperCount: Int { lock.withLock { sleepers.count } }

    /// Suspends until ``advance(by:)`` moves the boot clock to `deadline`.
    public func sleep(untilBootMilliseconds deadline: Int64) async throws {
        let id = lock.withLock {
            nextSleeper += 1
            return nextSleeper
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow: (any Error)?? = lock.withLock {
                    if Task.isCancelled { return .some(CancellationError()) }
                    if deadline <= boot { return .some(nil) }
                    sleepers[id] = (
                        deadline,
                        { @Sendable reached in
                            continuation.resume(with: reached ? .success(()) : .failure(CancellationError()))
                        }
                    )
                    return .none
                }
                switch resumeNow {
                case .some(.some(let error)): continuation.resume(throwing: error)
                case .some(.none): continuation.resume()
                case .none: break
                }
            }
        } onCancel: {
            lock.withLock { sleepers.removeValue(forKey: id) }?.fire(false)
        }
    }

    /// Calls `action` once ``advance(by:)`` (or a reboot) moves the boot clock to `deadline`, at
    /// once if it is there already; the returned closure cancels the alarm.
    func alarm(atBootMilliseconds deadline: Int64, _ action: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
        let id = lock.withLock { () -> UInt64? in
            if deadline <= boot { return nil }
            nextSleeper += 1
            sleepers[nextSleeper] = (deadline, { @Sendable reached in if reached { action() } })
            return nextSleeper
        }
        guard let id else {
            action()
            return {}
        }
        return { [weak self] in self?.lock.withLock { _ = self?.sleepers.removeValue(forKey: id) } }
    }

    /// Removes the sleepers whose deadline matches and returns their wake-ups. Call under `lock`.
    private func takeSleepers(where due: (Int64) -> Bool) -> [@Sendable () -> Void] {
        let ids = sleepers.filter { due($0.value.deadline) }.map(\.key)
        return ids.compactMap { id -> (@Sendable () -> Void)? in
            guard let fire = sleepers.removeValue(forKey: id)?.fire else { return nil }
            return { fire(true) }
        }
    }

    /// Sets the wall clock by `offset` (forwards or backwards), as a person or NTP would;
    /// the boot clock does not move.
    public func moveSystemClock(by offset: Duration) {
        lock.withLock { system += offset.milliseconds }
    }

    /// Sets the wall clock to an instant; the boot clock does not move.
    public func setSystemClock(to instant: Date) {
        lock.withLock { system = instant.millisecondsSince1970 }
    }

    /// The machine is off for `downtime` and boots again: the wall clock moves on by `downtime`,
    /// the boot clock starts again from `uptime`, and the boot identity changes.
    ///
    /// Sleepers are woken: whatever slept across the reboot finds a different world.
    public func reboot(after downtime: Duration, uptime: Duration = .seconds(5)) {
        let woken = lock.withLock {
            boots += 1
            system += downtime.milliseconds
            boot = uptime.milliseconds
            bootID = bootID.map { _ in "virtual-boot-\(boots)" }
            return takeSleepers { _ in true }
        }
        woken.forEach { $0() }
    }
}

extension Duration {
    /// Whole milliseconds, rounded towards negative infinity (saturating at the bounds of `Int64`).
    package var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        if overflow { return seconds < 0 ? .min : .max }
        let fraction = attoseconds / 1_000_000_000_000_000
        let floored = attoseconds < 0 && attoseconds % 1_000_000_000_000_000 != 0 ? fraction - 1 : fraction
        let (sum, sumOverflow) = product.addingReportingOverflow(floored)
        return sumOverflow ? (seconds < 0 ? .min : .max) : sum
    }
}
