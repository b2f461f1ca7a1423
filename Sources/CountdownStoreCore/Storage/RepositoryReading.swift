import Foundation

/// A position in the soonest-first order of one source of active items: `(sort value, key)`.
package struct SortPosition: Sendable, Hashable, Codable {
    package var value: Int64
    package var key: String
}

/// How many items are in one state and group.
package struct CountRow: Sendable, Hashable {
    package var state: CountdownState
    package var group: String?
    package var count: Int

    /// A value with every field given.
    package init(state: CountdownState, group: String?, count: Int) {
        self.state = state
        self.group = group
        self.count = count
    }
}

/// Reads inside one transaction. The store's logic is written against this protocol; each
/// engine implements it.
package protocol RepositoryReading {
    func checkpoint() throws -> Checkpoint?
    func lease() throws -> Lease
    /// The checkpoint, the lease and the soonest deadlines, in one query: what every transaction reads first.
    func clocks() throws -> (Checkpoint?, Lease, SoonestDeadlines)
    /// At most `limit` rows of `listing`, in its order (the lists themselves are in ``ItemListing``).
    func items(_ listing: ItemListing, limit: Int) throws -> [ItemRecord]
    /// Running countdowns of one policy whose deadline is at most `deadline`, counted per group.
    func dueCounts(policy: CountdownPolicy, dueBy deadline: Int64) throws -> [(group: String?, count: Int)]
    func counts() throws -> [CountRow]
    /// At most `limit` events of `listing`, in its order.
    func events(_ listing: EventListing, limit: Int) throws -> [EventRecord]
    func lastEventID() throws -> Int64
    /// The events after `id` of `kinds` and of `group` (`nil`: any), by ID, at most `limit`, up
    /// to `last` (`nil`: every event there is), read through the indexes by kind and by group:
    /// never the events of other kinds or groups. Returns them, and the ID through which every
    /// such event was read (past the last one returned when none comes before the next).
    func events(kinds: [String]?, group: String?, after id: Int64, through last: Int64?, limit: Int) throws -> (
        records: [EventRecord], readThrough: Int64
    )
    /// The last generation of `key` before it was removed, if it ever was.
    func retiredGeneration(key: String) throws -> Int64?
    /// Named consumers with their cursors and the instant each last moved.
    func consumers() throws -> [(name: String, cursor: Int64, updatedAtMs: Int64)]
    /// The items with these keys, whatever their state (in no particular order).
    func items(keys: [String]) throws -> [ItemRecord]
    /// The consumer's cursor; in a write transaction, its row stays locked until the end, so
    /// that readers of one consumer take their claims one after another.
    func consumerCursor(_ name: String) throws -> Int64?
    /// The claims of a consumer, by first event id.
    func consumerClaims(_ name: String) throws -> [ConsumerClaim]
}

/// Which events a read wants, in which order.
package enum EventListing: Sendable, Hashable {
    /// The events after `id`, oldest first: a reader's next events.
    case after(id: Int64)
    /// The most recent events of these kinds (of every kind when `nil`), newest first.
    case recent(kinds: [String]?)
    /// The events of `key` among the `window` most recent events of the store, newest first: a
    /// bounded read however many events the store holds.
    case recentOf(key: String, window: Int)
}

extension RepositoryReading {
    /// The item with this key, whatever its state.
    package func item(key: String) throws -> ItemRecord? {
        try items(keys: [key]).first
    }

    /// At most `limit` events after `id`, oldest first.
    package func events(afterID id: Int64, limit: Int) throws -> [EventRecord] {
        try events(.after(id: id), limit: limit)
    }
}
