import Foundation

/// A value guarded by a lock, for the little mutable state a `Sendable` store keeps in memory.
package final class Locked<Value>: @unchecked Sendable {
    // Safe: `value` is only reached through `withLock`, which holds `lock`.
    private let lock = NSLock()
    private var value: Value

    package init(_ value: Value) {
        self.value = value
    }

    package func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

extension Locked where Value == Bool {
    /// Sets the flag to `new` and returns what it was, in one step.
    package func exchange(_ new: Bool) -> Bool {
        withLock { value in
            defer { value = new }
            return value
        }
    }
}
