import Foundation

/// The operations under way on a store's engine. Closing the store refuses new ones, with a
/// clear error, and waits for those under way, so that no transaction ever runs on a closed
/// database (a task left behind by the host, a reader that ends after the store closed). The
/// wait is bounded: past the stop's deadline the engine closes once they end, unawaited.
final class OperationsUnderWay: Sendable {
    private struct State {
        var open = true
        var running = 0
        var drained: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Locked(State())

    /// Runs `body` unless the store is closed.
    ///
    /// - Throws: ``CountdownError/Code/wrongState`` once the store is closed; what `body` throws.
    func run<T>(_ body: () async throws -> T) async throws -> T {
        let entered = state.withLock { state -> Bool in
            guard state.open else { return false }
            state.running += 1
            return true
        }
        guard entered else { throw CountdownError(.wrongState, "the store is closed") }
        defer {
            let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.running -= 1
                guard state.running == 0 else { return [] }
                defer { state.drained.removeAll() }
                return state.drained
            }
            waiters.forEach { $0.resume() }
        }
        return try await body()
    }

    /// Refuses new operations from now on; returns how many are still under way.
    @discardableResult
    func refuseNew() -> Int {
        state.withLock { state in
            state.open = false
            return state.running
        }
    }

    /// Returns once no operation is under way.
    func drained() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                if state.running == 0 { return true }
                state.drained.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }
}
