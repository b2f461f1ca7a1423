import Foundation

/// When the statements of one transaction stop being waited for: once the engine is abandoned,
/// or a while after the task waiting for the transaction was cancelled.
final class StatementWatch: @unchecked Sendable {
    // Safe: `giveUpAt` is only touched under `lock`.
    private let lock = NSLock()
    private var giveUpAt: DispatchTime?
    private var graceMs = 0
    private let engine: EngineAbandonment
    /// How long one statement may go unanswered on an open connection (`nil`: without a bound).
    let answerBoundMs: Int?

    init(_ engine: EngineAbandonment, answerBoundMs: Int? = nil) {
        self.engine = engine
        self.answerBoundMs = answerBoundMs
    }

    /// Gives up `milliseconds` from now (or earlier, if asked before).
    func giveUp(afterMs milliseconds: Int) {
        let at = DispatchTime.now() + .milliseconds(milliseconds)
        lock.withLock {
            if let earlier = giveUpAt, earlier <= at { return }
            giveUpAt = at
            graceMs = milliseconds
        }
    }

    /// Why the statement is no longer waited for, or `nil` while it still is.
    func reasonToGiveUp() -> String? {
        if engine.isAbandoned { return "the store closed without waiting any longer" }
        let (at, grace) = lock.withLock { (giveUpAt, graceMs) }
        guard let at, DispatchTime.now() >= at else { return nil }
        return "no answer within \(grace) ms after the task was cancelled"
    }
}
