import Foundation

/// Whether a store gave up on its engine's operations under way: set once, when it closes.
final class EngineAbandonment: @unchecked Sendable {
    // Safe: `abandoned` is only touched under `lock`.
    private let lock = NSLock()
    private var abandoned = false

    /// From now on, no statement of the engine is waited for.
    func abandon() {
        lock.withLock { abandoned = true }
    }

    /// Whether ``abandon()`` was called.
    var isAbandoned: Bool { lock.withLock { abandoned } }
}
