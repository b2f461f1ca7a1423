import Foundation

@testable import CountdownStoreCore

/// A ticker running in a task on a fixture's store; cancelled when the test is done with it.
struct RunningTicker {
    let ticker: CountdownTicker
    let task: Task<Void, any Error>

    init(_ store: CountdownStore) async {
        ticker = CountdownTicker(store: store)
        let ticker = ticker
        task = Task { try await ticker.run() }
        await ticker.waitUntilIdle()
    }

    /// Moves virtual time forward and waits until the ticker has handled it.
    func advance(_ clock: VirtualClock, by duration: Duration, step: Duration = .milliseconds(250)) async {
        var left = duration
        while left > .zero {
            let next = min(step, left)
            clock.advance(by: next)
            left -= next
            await ticker.waitUntilIdle()
        }
    }

    func stop() async throws {
        task.cancel()
        try await task.value
    }
}
