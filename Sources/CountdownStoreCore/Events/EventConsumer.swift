import Foundation
import Logging

/// A named reader of a store's events with a persisted cursor: it gets every event at least
/// once, in order, across restarts, until it acknowledges it.
///
/// ```swift
/// let mailer = try await store.consumer("mailer")
/// for try await expiry in try await mailer.events(.expiries) {
///     try await sendReminder(for: expiry)
///     try await mailer.acknowledge(expiry)   // not delivered again, even after a restart
/// }
/// ```
///
/// An event is delivered again only if the process stops before acknowledging it.
///
/// A consumer may have several readers at once (tasks, processes, hosts): each event goes to one
/// of them, and order holds within what each is given. How they share the work, and what a dead
/// or stalled reader leaves to the others, is in the article "Recovery and delivery".
public struct EventConsumer: Sendable {
    /// The consumer's name: its identity in the `countdown_consumers` table.
    public let name: String
    let store: CountdownStore

    /// The events after the last acknowledged one, then every new one, matching `filter`.
    public func events(_ filter: EventFilter = .all) async throws(CountdownError) -> CountdownEvents {
        let filter = try filter.validated()
        return CountdownEvents(store: store, filter: filter, after: 0, consumer: name)
    }

    /// Records that `event`, and every event given to the same reader before it, has been
    /// handled, and renews that reader's claim. The cursor never moves back.
    public func acknowledge(_ event: CountdownEvent) async throws(CountdownError) {
        try await store.acknowledge(consumer: name, eventID: event.id, through: false)
    }

    /// Records that every event up to `id` has been handled, whichever reader was given it. The
    /// cursor never moves back.
    public func acknowledge(through id: Int64) async throws(CountdownError) {
        try await store.acknowledge(consumer: name, eventID: id, through: true)
    }

    /// The id of the last event acknowledged (0 when none).
    public func acknowledgedThrough() async throws(CountdownError) -> Int64 {
        let name = name
        return try await store.reading { tx, _ in try tx.consumerCursor(name) ?? 0 }
    }
}
