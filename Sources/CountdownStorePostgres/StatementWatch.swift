import Foundation

/// When the statements of one transaction stop being waited for: once the engine is abandoned,
/// or a while after the task waiting for the transaction was cancelled.
final class StatementWatch: Sendable {
    /// When to give up, and the grace it was given.
    private let givingUp = Locked<(at: DispatchTime, graceMs: Int)?>(nil)
    /// Whether the store gave up on its engine's operations (set once, when it closes).
    private let abandoned: Locked<Bool>
    /// How long one statement may go unanswered on an open connection (`nil`: without a bound).
    let answerBoundMs: Int?

    init(_ abandoned: Locked<Bool>, answerBoundMs: Int? = nil) {
        self.abandoned = abandoned
        self.answerBoundMs = answerBoundMs
    }

    /// Gives up `milliseconds` from now (or earlier, if asked before).
    func giveUp(afterMs milliseconds: Int) {
        let at = DispatchTime.now() + .milliseconds(milliseconds)
        givingUp.withLock { givingUp in
            if let earlier = givingUp?.at, earlier <= at { return }
            givingUp = (at, milliseconds)
        }
    }

    /// Why the statement is no longer waited for, or `nil` while it still is.
    func reasonToGiveUp() -> String? {
        if abandoned.withLock({ $0 }) { return "the store closed without waiting any longer" }
        guard let (at, grace) = givingUp.withLock({ $0 }), DispatchTime.now() >= at else { return nil }
        return "no answer within \(grace) ms after the task was cancelled"
    }
}
