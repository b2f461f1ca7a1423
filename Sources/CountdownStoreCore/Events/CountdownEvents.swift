import Foundation
import Logging

/// An endless, ordered sequence of a store's events, read from its `countdown_events` table.
///
/// It waits for new events after a write of the same store instance (at once) or of another
/// process (noticed within 250 ms, or at once where the engine sends notifications), and ends
/// when the consuming task is cancelled. Each iteration of a named consumer's events is one
/// reader of that consumer: readers in other tasks, processes or hosts share its events (see
/// ``EventConsumer``).
/// An expiry whose item has since moved to a newer generation (restart, extend, shorten,
/// replace) is never delivered.
public struct CountdownEvents: AsyncSequence, Sendable {
    /// Events, one at a time.
    public typealias Element = CountdownEvent

    let store: CountdownStore
    let filter: EventFilter
    /// Delivery begins after the event with this id (live events).
    let after: Int64
    /// The named consumer whose events these are: they are taken by claims.
    let consumer: String?

    /// Creates the iterator: for a named consumer, a reader of its own.
    public func makeAsyncIterator() -> Iterator {
        Iterator(
            store: store, filter: filter, after: after, consumer: consumer.map { Reader(store: store, consumer: $0) })
    }
}
