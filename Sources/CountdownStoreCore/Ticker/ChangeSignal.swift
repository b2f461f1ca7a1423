import Foundation

/// A broadcast "something changed" with a version number: writers bump it, waiters wake.
///
/// The store bumps it after every committed write that changed items or events; the ticker bumps
/// it when it notices another process's write. Waiters compare versions, so no bump is missed.
final class ChangeSignal: Sendable {
    private struct State {
        var version: UInt64 = 0
        var waiters: [UInt64: Waiter] = [:]
        var nextWaiter: UInt64 = 0
    }

    /// A waiter: how to wake it, and the one group whose events alone it waits for (`nil`: any
    /// change).
    private struct Waiter {
        let group: String?
        let resume: @Sendable () -> Void
    }

    private let state = Locked(State())

    /// The current version.
    var version: UInt64 { state.withLock { $0.version } }

    /// The groups of the waiters waiting now (`nil` for one that waits for any change).
    var waitingGroups: [String?] { state.withLock { $0.waiters.values.map(\.group) } }

    /// Bumps the version and wakes every waiter.
    func bump() {
        bump(eventsOfGroups: nil)
    }

    /// Bumps the version and wakes the waiters it concerns: when the change wrote nothing but
    /// events of `groups` (an expiry batch: `nil` when it may have changed anything else), a
    /// waiter for one other group's events sleeps on. A busy group's batches then do not wake
    /// every other group's reader to look for events that are not there.
    func bump(eventsOfGroups groups: Set<String>?) {
        let woken = state.withLock { state in
            state.version &+= 1
            var woken: [@Sendable () -> Void] = []
            for (id, waiter) in state.waiters {
                if let groups, let group = waiter.group, !groups.contains(group) { continue }
                woken.append(waiter.resume)
                state.waiters.removeValue(forKey: id)
            }
            return woken
        }
        woken.forEach { $0() }
    }

    /// Returns once the version differs from `version`, or the task is cancelled.
    func wait(after version: UInt64) async {
        await wait(after: version, group: nil, alarm: nil)
    }

    /// Returns once the version differs from `version` or `clock` reaches `deadline`, whichever
    /// comes first. A waiter for the events of one `group` alone is not woken by a change that
    /// wrote nothing but other groups' events (``bump(eventsOfGroups:)``); one that happened
    /// before the wait began still ends it at once.
    ///
    /// - Throws: `CancellationError` when the task is cancelled.
    func wait(
        after version: UInt64, orUntilBoot deadline: Int64, on clock: any StoreClock, forEventsOf group: String? = nil
    ) async throws {
        if let alarms = clock as? any BootAlarms {
            await wait(after: version, group: group) { wake in alarms.alarm(atBootMilliseconds: deadline, wake) }
        } else {
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { await self.wait(after: version, group: group, alarm: nil) }
                tasks.addTask { try await clock.sleep(untilBootMilliseconds: deadline) }
                defer { tasks.cancelAll() }
                _ = try await tasks.next()
            }
        }
        try Task.checkCancellation()
    }

    /// Waits on one continuation for a bump that concerns `group`'s waiters, cancellation, or the
    /// alarm `alarm` sets (it is given the wake-up and returns how to cancel it), whichever comes
    /// first.
    private func wait(
        after version: UInt64, group: String?, alarm: ((@escaping @Sendable () -> Void) -> @Sendable () -> Void)?
    ) async {
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
                    state.waiters[id] = Waiter(group: group, resume: resume)
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
