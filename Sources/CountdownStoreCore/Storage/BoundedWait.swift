import Foundation

/// Waits that give up at a stop's deadline.
package enum BoundedWait {
    /// The result of `task`, or `nil` when `deadline` comes first: then the wait gives up, and
    /// `task` is cancelled and left to end on its own.
    ///
    /// The deadline counts once it has started; a cancellation of the waiting task starts it.
    /// With `passingCancellation`, that cancellation reaches `task` at once (work that should
    /// stop now: a loop); without it, `task` goes on until the deadline (a final write that
    /// should complete if the database answers in time).
    package static func result<T: Sendable, Failure: Error>(
        of task: Task<T, Failure>, by deadline: StopDeadline, passingCancellation: Bool
    ) async -> Result<T, Failure>? {
        // Given up, the task is cancelled on the alarm's thread, not once this wait resumes: its
        // cancellation is what frees threads that wait behind it (an engine's lock waits end then).
        let race = WaitRace<T, Failure> { task.cancel() }
        Task { race.settle(.finished(await task.result)) }
        if let instant = deadline.instant { race.arm(at: instant) }
        let outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { race.install($0) }
        } onCancel: {
            if passingCancellation { task.cancel() }
            race.arm(at: deadline.start())
        }
        guard case .finished(let result) = outcome else { return nil }
        return result
    }
}

/// How a bounded wait ended.
private enum WaitOutcome<T: Sendable, Failure: Error>: Sendable {
    case finished(Result<T, Failure>)
    case gaveUp
}

/// A task's end raced against an alarm at the deadline: the first settles the wait.
private final class WaitRace<T: Sendable, Failure: Error>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<WaitOutcome<T, Failure>, Never>?
        var outcome: WaitOutcome<T, Failure>?
        var armed = false
        var disarm: (@Sendable () -> Void)?
    }

    private let state = Locked(State())
    /// What giving up does first.
    private let onGiveUp: @Sendable () -> Void

    init(onGiveUp: @escaping @Sendable () -> Void) {
        self.onGiveUp = onGiveUp
    }

    /// The waiter: resumed at once if the race is settled already.
    func install(_ continuation: CheckedContinuation<WaitOutcome<T, Failure>, Never>) {
        let settled = state.withLock { state -> WaitOutcome<T, Failure>? in
            if let outcome = state.outcome { return outcome }
            state.continuation = continuation
            return nil
        }
        if let settled { continuation.resume(returning: settled) }
    }

    /// Settles the race with `outcome` unless it is settled already.
    func settle(_ outcome: WaitOutcome<T, Failure>) {
        let (settling, continuation, disarm) = state.withLock {
            state -> (Bool, CheckedContinuation<WaitOutcome<T, Failure>, Never>?, (@Sendable () -> Void)?) in
            guard state.outcome == nil else { return (false, nil, nil) }
            state.outcome = outcome
            defer {
                state.continuation = nil
                state.disarm = nil
            }
            return (true, state.continuation, state.disarm)
        }
        disarm?()
        if case .gaveUp = outcome, settling { onGiveUp() }
        continuation?.resume(returning: outcome)
    }

    /// Gives up at `deadline` (boot-clock milliseconds) unless settled before; armed once.
    func arm(at deadline: Int64) {
        let arming = state.withLock { state -> Bool in
            guard state.outcome == nil, !state.armed else { return false }
            state.armed = true
            return true
        }
        guard arming else { return }
        let disarm = SystemClock().alarm(atBootMilliseconds: deadline) { [self] in settle(.gaveUp) }
        let settled = state.withLock { state -> Bool in
            guard state.outcome == nil else { return true }
            state.disarm = disarm
            return false
        }
        if settled { disarm() }
    }
}
