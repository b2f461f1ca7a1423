import Foundation

/// What a display subscription receives on each aligned tick: its items, all computed at one instant.
public struct TickSnapshot: Sendable, Hashable {
    /// The store clocks at the tick. Every subscription with the same interval gets the same
    /// aligned instant: `time.wall` is a whole multiple of the interval.
    public var time: StoreTime
    /// The subscribed items with their figures at ``time``: by key, the items that exist in any
    /// state; by group, the running and paused ones. Sorted by remaining time, stopwatches last.
    public var items: [Countdown]
}

/// Which items a display subscription follows.
enum TickSelection: Sendable, Hashable {
    case keys(Set<String>)
    /// One group's active items, or every active item when `nil`.
    case group(String?)

    func includes(_ item: ItemRecord) -> Bool {
        switch self {
        case .keys(let keys): keys.contains(item.key)
        case .group(let group): item.state.isActive && (group == nil || item.group == group)
        }
    }
}

/// One display subscription of a ticker.
struct TickSubscription: Sendable {
    var selection: TickSelection
    var intervalMs: Int64
    /// The next aligned instant on the store wall clock.
    var nextWall: Int64?
    /// The items it follows, in key order, as of the last change.
    var items: [ItemRecord] = []
    var continuation: AsyncStream<TickSnapshot>.Continuation
}
