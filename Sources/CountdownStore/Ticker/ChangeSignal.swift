import Foundation

/// A broadcast "something changed" with a version number: writers bump it, waiters wake.
///
/// The store bumps it after every committed write that changed items or events; the ticker bumps
/// it when it notices another process's write. Waiters compare versions, so no bump is missed.
final class ChangeSignal: Sendable {
    private struct State {
        var version: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
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
        woken.forEach { $0.resume() }
    }

    /// Returns once the version differs from `version`, or the task is cancelled.
    func wait(after version: UInt64) async {
        let id = state.withLock { state in
            state.nextWaiter &+= 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.version != version || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }

    /// Returns once the version differs from `version` or `clock` reaches `deadline`, whichever
    /// comes first.
    ///
    /// - Throws: `CancellationError` when the task is cancelled.
    func wait(after version: UInt64, orUntilBoot deadline: Int64, on clock: any StoreClock) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await self.wait(after: version) }
            group.addTask { try await clock.sleep(untilBootMilliseconds: deadline) }
            defer { group.cancelAll() }
            _ = try await group.next()
        }
        try Task.checkCancellation()
    }
}
