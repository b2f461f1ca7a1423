import Foundation

// Recording due expiries for a host with no ticker (`expireDue()`), in batches of short
// transactions through the write pipeline, as the ticker does; and the ticker's upkeep.

extension CountdownStore {
    /// Records the expiry of every running countdown that has reached its deadline, oldest
    /// deadline first, each with its expiry event (with the instant it reached zero, the instant
    /// it was recorded, lateness and generation), in transactions of at most
    /// ``Configuration/expiryBatchSize`` expiries, each committed before the next.
    ///
    /// The ticker does this at each deadline; a host without one may too. A countdown that has
    /// reached zero is already `expired` for every reader before its expiry is recorded; recording
    /// it appends the event consumers receive. The items returned are held in memory: for a
    /// backlog of any size, call ``expireDue(limit:)`` until it returns none.
    ///
    /// - Returns: the items expired.
    @discardableResult
    public func expireDue() async throws(CountdownError) -> [Countdown] {
        var expired: [Countdown] = []
        while true {
            let batch = try await expireDue(limit: configuration.expiryBatchSize)
            expired += batch
            if batch.isEmpty { return expired }
            if batch.count >= configuration.expiryBatchSize { await leaveWritesToOthers() }
        }
    }

    /// Records the expiry of at most `limit` countdowns that have reached their deadline, the
    /// oldest first, in one transaction that also appends their expiry events.
    ///
    /// - Parameter limit: how many at most, 1 or more.
    /// - Returns: the items expired; empty when none was due.
    @discardableResult
    public func expireDue(limit: Int) async throws(CountdownError) -> [Countdown] {
        guard limit >= 1 else { throw CountdownError(.invalidArgument, "invalid limit \(limit): must be at least 1") }
        return try await writing(.expire, expiryLimit: limit) { _, now, expired in expired.map { $0.countdown(at: now) }
        }
    }

    /// The engine's upkeep (on a store's own file, its log checkpointer) for work that
    /// writes in batches: a ticker that starts running, a prune. One runs at a time for a store
    /// instance, shared by all that need it, started by the first and stopped by the last to let
    /// it go (``releaseUpkeep()``); a start waits for the stop of the one before.
    func startUpkeep() async throws(CountdownError) -> (any EngineUpkeep)? {
        guard capabilities.upkeep != nil else { return nil }
        while true {
            enum Step {
                case shared(any EngineUpkeep)
                case waitFor(SharedUpkeep.Stopping)
                case start
            }
            let step = upkeep.withLock { shared -> Step in
                if let stopping = shared.stopping { return .waitFor(stopping) }
                if let running = shared.running {
                    shared.holders += 1
                    return .shared(running)
                }
                return .start
            }
            switch step {
            case .shared(let running): return running
            case .waitFor(let stopping):
                // The last one's stop is under way: the next starts after it.
                await stopping.task.value
                upkeep.withLock { shared in
                    if shared.stopping === stopping { shared.stopping = nil }
                }
                continue
            case .start: break
            }
            let started = try translatingErrorsNow(path: path) { try capabilities.upkeep?.startUpkeep() }
            guard let started else { return nil }
            let kept = upkeep.withLock { shared -> (any EngineUpkeep)? in
                guard shared.running == nil, shared.stopping == nil else { return nil }
                shared.running = started
                shared.holders = 1
                return started
            }
            if let kept { return kept }
            // Another caller started one meanwhile: this one goes, and the shared one serves.
            await started.stop()
        }
    }

    /// Lets go of the upkeep ``startUpkeep()`` gave: the last to let go stops it.
    func releaseUpkeep() async {
        let stopping = upkeep.withLock { shared -> SharedUpkeep.Stopping? in
            guard let running = shared.running else { return nil }
            shared.holders -= 1
            guard shared.holders <= 0 else { return nil }
            shared.running = nil
            shared.holders = 0
            let stopping = SharedUpkeep.Stopping(task: Task { await running.stop() })
            shared.stopping = stopping
            return stopping
        }
        guard let stopping else { return }
        await stopping.task.value
        upkeep.withLock { shared in
            if shared.stopping === stopping { shared.stopping = nil }
        }
    }
}

/// The engine's upkeep a store instance runs, and how many hold it.
struct SharedUpkeep {
    /// A stop under way.
    final class Stopping: Sendable {
        let task: Task<Void, Never>
        init(task: Task<Void, Never>) { self.task = task }
    }

    var running: (any EngineUpkeep)?
    var holders = 0
    var stopping: Stopping?
}
