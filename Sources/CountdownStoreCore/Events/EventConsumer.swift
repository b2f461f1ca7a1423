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
    ///
    /// The acknowledgement is fenced to the reader's claim: it counts only while the reader
    /// that was given `event` holds the claim on it. When that claim ran out and another reader
    /// took it over (this reader stalled for longer than ``CountdownStore/Configuration/claimTimeout``),
    /// or `event` was not given to a reader of this consumer, nothing changes and the result
    /// is `false`: the other reader is handling it. To make a handler's own writes count
    /// exactly once, acknowledge in the same transaction (see the article "Transactions and
    /// exactly-once effects").
    ///
    /// - Returns: whether the acknowledgement was recorded.
    @discardableResult
    public func acknowledge(_ event: CountdownEvent) async throws(CountdownError) -> Bool {
        guard let claimant = event.claimant else { return false }
        return try await store.acknowledge(consumer: name, eventID: event.id, claimant: claimant)
    }

    /// Records that every event up to `id` has been handled, whichever reader was given it, and
    /// moves the cursor there: it skips, by name, whatever no reader was given up to `id`. The
    /// cursor never moves back, and never past the last event written.
    ///
    /// - Returns: whether the cursor moved (`false`, nothing changed: `id` is not after the
    ///   cursor, or no event has that id yet).
    @discardableResult
    public func acknowledge(through id: Int64) async throws(CountdownError) -> Bool {
        try await store.acknowledge(consumer: name, eventID: id, claimant: nil)
    }

    /// The id of the last event acknowledged (0 when none).
    public func acknowledgedThrough() async throws(CountdownError) -> Int64 {
        let name = name
        return try await store.reading { tx, _ in try tx.consumerCursor(name) ?? 0 }
    }
}
