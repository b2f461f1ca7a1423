import Foundation
import Logging

extension CountdownStore {
    /// Events recorded from this call on, matching `filter`: for live displays. Nothing is
    /// persisted; events recorded while nobody iterates are not replayed (use
    /// ``consumer(_:startingAt:)`` for that).
    public func events(_ filter: EventFilter = .all) async throws(CountdownError) -> CountdownEvents {
        let filter = try filter.validated()
        return CountdownEvents(store: self, filter: filter, after: try await lastEventID(), consumer: nil)
    }

    /// Where a new named consumer starts reading.
    public enum ConsumerStart: Sendable, Hashable {
        /// From the oldest event the store still holds.
        case beginning
        /// From the next event recorded.
        case now
    }

    /// The named consumer `name`, created on first use with its cursor at `start`.
    ///
    /// - Throws: ``CountdownError/Code/invalidArgument`` for a name that is not a valid key.
    public func consumer(_ name: String, startingAt start: ConsumerStart = .beginning) async throws(CountdownError)
        -> EventConsumer
    {
        let name = try Validate.consumerName(name)
        try await writing(.consumer, notifies: false) { tx, time in
            guard try tx.consumerCursor(name) == nil else { return }
            let cursor = start == .beginning ? 0 : try tx.lastEventID()
            try tx.createConsumer(name, cursor: cursor, at: time.wall)
        }
        return EventConsumer(name: name, store: self)
    }

    func lastEventID() async throws(CountdownError) -> Int64 {
        try await reading(events: true) { tx, _ in try tx.lastEventID() }
    }

    /// Events after `id` that match `filter`, leaving out expiries superseded by a newer generation;
    /// also returns the id of the last event examined, so the caller can move on past the others.
    func deliverableEvents(
        after id: Int64, filter: EventFilter, limit: Int
    ) async throws(CountdownError) -> ([CountdownEvent], Int64) {
        try await reading(events: true) { tx, _ in
            let records = try tx.events(afterID: id, limit: limit)
            return (try Self.deliverable(records, filter: filter, tx), records.last?.id ?? id)
        }
    }
}
