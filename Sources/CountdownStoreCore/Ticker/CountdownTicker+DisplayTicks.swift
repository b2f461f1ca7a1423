import Foundation
import Logging
import ServiceLifecycle

extension CountdownTicker {
    // MARK: - Display ticks

    /// Remaining time of the items with `keys`, every `interval`, on aligned instants.
    ///
    /// All subscriptions with the same interval fire on the same instant (a whole multiple of
    /// the interval on the store wall clock), so labels change in lockstep. Ticks are computed
    /// in memory from items read once per change, not by a query per tick. Cancelling the
    /// consuming task ends the subscription. Ticks flow while ``run()`` runs.
    ///
    /// - Throws: ``CountdownError`` for an invalid key or an interval outside 1 ms to 1 day.
    public func ticks(keys: [String], every interval: Duration = .seconds(1)) throws(CountdownError) -> AsyncStream<
        TickSnapshot
    > {
        var valid = Set<String>()
        for key in keys { valid.insert(try Validate.key(key)) }
        return try subscribe(.keys(valid), every: interval)
    }

    /// Remaining time of the running and paused items of `group` (of every group when `nil`),
    /// every `interval`, on aligned instants. See ``ticks(keys:every:)``.
    public func ticks(group: String?, every interval: Duration = .seconds(1)) throws(CountdownError) -> AsyncStream<
        TickSnapshot
    > {
        try subscribe(.group(try Validate.group(group)), every: interval)
    }

    func subscribe(_ selection: TickSelection, every interval: Duration) throws(CountdownError) -> AsyncStream<
        TickSnapshot
    > {
        let intervalMs = interval.milliseconds
        guard intervalMs >= 1, intervalMs <= 86_400_000 else {
            throw CountdownError(.invalidArgument, "invalid tick interval \(interval): must be between 1ms and 1 day")
        }
        let (stream, continuation) = AsyncStream.makeStream(of: TickSnapshot.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state in
            state.nextSubscription += 1
            state.subscriptions[state.nextSubscription] = TickSubscription(
                selection: selection, intervalMs: intervalMs, nextWall: nil, continuation: continuation)
            state.tickItemsStale = true
            return state.nextSubscription
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscriptions.removeValue(forKey: id) }
        }
        store.changes.bump()  // wake the loop to schedule the first tick
        return stream
    }

    /// Sends every tick that is due; returns the boot instant of the next one.
    ///
    /// The items each subscription follows are picked out once per change; a tick only computes
    /// their figures at one instant and orders them (by a sort of small keys, not of records).
    func emitTicks() async throws -> Int64? {
        let (empty, stale, selections) = state.withLock { state in
            (state.subscriptions.isEmpty, state.tickItemsStale, state.subscriptions.values.map(\.selection))
        }
        if empty { return nil }
        if stale {
            let items = try await store.tickItems(for: selections)
            let byKey = Dictionary(items.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
            let inKeyOrder = byKey.values.sorted { $0.key < $1.key }
            state.withLock { state in
                for (id, var subscription) in state.subscriptions {
                    subscription.items = inKeyOrder.filter { subscription.selection.includes($0) }
                    state.subscriptions[id] = subscription
                }
                state.tickItemsStale = false
            }
        }
        guard let now = store.cachedTime() else { return nil }
        let time = now.clocks
        let boot = store.configuration.clock.bootMilliseconds
        // Subscriptions due now, taken out of the lock so their figures are computed without it.
        let due = state.withLock { state -> [(id: UInt64, subscription: TickSubscription)] in
            var due: [(id: UInt64, subscription: TickSubscription)] = []
            for (id, var subscription) in state.subscriptions {
                let aligned = (time.wall / subscription.intervalMs + 1) * subscription.intervalMs
                guard let next = subscription.nextWall else {
                    subscription.nextWall = aligned
                    state.subscriptions[id] = subscription
                    continue
                }
                if time.wall >= next {
                    subscription.nextWall = aligned
                    state.subscriptions[id] = subscription
                    due.append((id, subscription))
                }
            }
            return due
        }
        for (_, subscription) in due {
            var tickTime = time
            tickTime.wall = time.wall - time.wall % subscription.intervalMs  // the aligned instant
            subscription.continuation.yield(
                TickSnapshot(time: tickTime, items: Self.figures(subscription.items, at: now)))
        }
        return state.withLock { state -> Int64? in
            state.subscriptions.values.compactMap(\.nextWall).map { boot + $0 - time.wall }.min()
        }
    }

    /// `items` (in key order) with their figures at `time`, soonest to expire first, stopwatches
    /// last, ties in key order.
    static func figures(_ items: [ItemRecord], at time: ClocksNow) -> [Countdown] {
        var order: [(sort: Int64, index: Int)] = []
        order.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            order.append((item.kind == .stopwatch ? .max : item.sortRemainingMs(at: time), index))
        }
        order.sort { ($0.sort, $0.index) < ($1.sort, $1.index) }
        return order.map { items[$0.index].countdown(at: time) }
    }
}
