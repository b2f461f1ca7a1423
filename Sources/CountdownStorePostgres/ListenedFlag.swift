import Foundation

/// Whether a LISTEN was established since the flag was last taken.
final class ListenedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false

    /// Raises the flag.
    func set() {
        lock.withLock { value = true }
    }

    /// Whether the flag was raised, lowering it.
    func take() -> Bool {
        lock.withLock {
            defer { value = false }
            return value
        }
    }
}
