import Foundation

/// A broadcast "something changed" with a version number: writers bump it, waiters wake.
///
/// The store bumps it after every committed write that changed items or events; the ticker bumps
/// it when it notices another process's write. Waiters compare versions, so no bump is missed.
final class ChangeSignal: Sendable {
    private struct State {
        var version: UInt64 = 0
        var waiters: [UInt64: @Sendable () -> Void] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state = Locked(State())

    /// The current version.
    var version: UInt64 { state.withLock { $0.version } }

    /// Bumps the version and wakes every waiter.
    func bump() {
        let woken = state.withLock { state in
            state.version &+= 1
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        woken.forEach { $0() }
    }

    /// Returns once the version differs from `version`, or the task is cancelled.
    func wait(after version: UInt64) async {
        await wait(after: version, alarm: nil)
    }

    /// Returns once the version differs from `version` or `clock` reaches `deadline`, whichever
    /// comes first.
    ///
    /// - Throws: `CancellationError` when the task is cancelled.
    func wait(after version: UInt64, orUntilBoot deadline: Int64, on clock: any StoreClock) async throws {
        if let alarms = clock as? any BootAlarms {
            await wait(after: version) { wake in alarms.alarm(atBootMilliseconds: deadline, wake) }
        } else {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await self.wait(after: version) }
                group.addTask { try await clock.sleep(untilBootMilliseconds: deadline) }
                defer { group.cancelAll() }
                _ = try await group.next()
            }
        }
        try Task.checkCancellation()
    }

    /// Waits on one continuation for a bump, cancellation, or the alarm `alarm` sets (it is given
    /// the wake-up and returns how to cancel it), whichever comes first.
    private func wait(after version: UInt64, alarm: ((@escaping @Sendable () -> Void) -> @Sendable () -> Void)?) async {
        let id = state.withLock { state in
            state.nextWaiter &+= 1
            return state.nextWaiter
        }
        let wake = Locked<(@Sendable () -> Void)?>(nil)
        let cancelAlarm = Locked<(@Sendable () -> Void)?>(nil)
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let once = Locked(false)
                let resume: @Sendable () -> Void = {
                    let first = once.withLock { resumed in
                        defer { resumed = true }
                        return !resumed
                    }
                    if first { continuation.resume() }
                }
                wake.withLock { $0 = resume }
                let now = state.withLock { state -> Bool in
                    if state.version != version || Task.isCancelled { return true }
                    state.waiters[id] = resume
                    return false
                }
                if now {
                    resume()
                } else if let alarm {
                    let cancel = alarm(resume)
                    cancelAlarm.withLock { $0 = cancel }
                }
            }
        } onCancel: {
            wake.withLock { $0 }?()
        }
        state.withLock { _ = $0.waiters.removeValue(forKey: id) }
        cancelAlarm.withLock { $0 }?()
    }
}
