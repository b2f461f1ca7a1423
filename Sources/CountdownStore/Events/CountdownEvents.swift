import Foundation

/// An endless, ordered sequence of a store's events, read from its `countdown_events` table.
///
/// It waits for new events after a write of the same store instance (at once) or of another
/// process (noticed within 250 ms), and ends when the consuming task is cancelled.
/// An expiry whose item has since moved to a newer generation (restart, extend, shorten,
/// replace) is never delivered.
public struct CountdownEvents: AsyncSequence, Sendable {
    /// Events, one at a time.
    public typealias Element = CountdownEvent

    let store: CountdownStore
    let filter: EventFilter
    /// Delivery begins after the event with this id.
    let after: Int64

    /// Creates the iterator.
    public func makeAsyncIterator() -> Iterator {
        Iterator(store: store, filter: filter, after: after)
    }

    /// Reads events in batches and waits for more when it has delivered them all.
    public struct Iterator: AsyncIteratorProtocol {
        let store: CountdownStore
        let filter: EventFilter
        var after: Int64
        var buffer: [CountdownEvent] = []
        var bufferIndex = 0

        init(store: CountdownStore, filter: EventFilter, after: Int64) {
            self.store = store
            self.filter = filter
            self.after = after
        }

        /// The next event, waiting for it as long as needed; `nil` once the task is cancelled.
        ///
        /// - Throws: ``CountdownError`` when the database cannot be read.
        public mutating func next() async throws -> CountdownEvent? {
            while !Task.isCancelled {
                if bufferIndex < buffer.count {
                    defer { bufferIndex += 1 }
                    return buffer[bufferIndex]
                }
                let version = store.changes.version
                let (events, last) = try await store.deliverableEvents(after: after, filter: filter, limit: 256)
                after = last
                buffer = events
                bufferIndex = 0
                if buffer.isEmpty {
                    do {
                        let clock = store.configuration.clock
                        try await store.changes.wait(
                            after: version, orUntilBoot: clock.bootMilliseconds + 250, on: clock)
                    } catch {
                        return nil
                    }
                }
            }
            return nil
        }
    }
}

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
public struct EventConsumer: Sendable {
    /// The consumer's name: its identity in the `countdown_consumers` table.
    public let name: String
    let store: CountdownStore

    /// The events after the last acknowledged one, then every new one, matching `filter`.
    public func events(_ filter: EventFilter = .all) async throws(CountdownError) -> CountdownEvents {
        let filter = try filter.validated()
        let cursor = try await acknowledgedThrough()
        return CountdownEvents(store: store, filter: filter, after: cursor)
    }

    /// Records that `event` and every event before it have been handled.
    public func acknowledge(_ event: CountdownEvent) async throws(CountdownError) {
        try await acknowledge(through: event.id)
    }

    /// Records that every event up to `id` has been handled. The cursor never moves back.
    public func acknowledge(through id: Int64) async throws(CountdownError) {
        let name = name
        try await store.writing(notifies: false) { tx, time in
            try tx.advanceConsumer(name, to: id, at: time.wall)
        }
    }

    /// The id of the last event acknowledged (0 when none).
    public func acknowledgedThrough() async throws(CountdownError) -> Int64 {
        let name = name
        return try await store.reading { tx, _ in try tx.consumerCursor(name) ?? 0 }
    }
}

extension CountdownStore {
    /// Events recorded from this call on, matching `filter`: for live displays. Nothing is
    /// persisted; events recorded while nobody iterates are not replayed (use
    /// ``consumer(_:startingAt:)`` for that).
    public func events(_ filter: EventFilter = .all) async throws(CountdownError) -> CountdownEvents {
        let filter = try filter.validated()
        return CountdownEvents(store: self, filter: filter, after: try await lastEventID())
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
    public func consumer(_ name: String, startingAt start: ConsumerStart = .beginning) async throws(CountdownError) -> EventConsumer {
        let validName: String
        do {
            validName = try Validate.key(name)
        } catch {
            throw CountdownError(.invalidArgument, error.message.replacingOccurrences(of: "key", with: "consumer name"))
        }
        let name = validName
        try await writing(notifies: false) { tx, time in
            guard try tx.consumerCursor(name) == nil else { return }
            let cursor = start == .beginning ? 0 : try tx.lastEventID()
            try tx.createConsumer(name, cursor: cursor, at: time.wall)
        }
        return EventConsumer(name: name, store: self)
    }

    func lastEventID() async throws(CountdownError) -> Int64 {
        try await reading { tx, _ in try tx.lastEventID() }
    }

    /// Events after `id` that match `filter`, leaving out expiries superseded by a newer generation;
    /// also returns the id of the last event examined, so the caller can move on past the others.
    func deliverableEvents(
        after id: Int64, filter: EventFilter, limit: Int
    ) async throws(CountdownError) -> ([CountdownEvent], Int64) {
        try await reading { tx, _ in
            let records = try tx.events(afterID: id, limit: limit)
            var generations: [String: Int64?] = [:]
            let deliverable = try records.filter { record in
                guard filter.matches(record) else { return false }
                guard record.kind == EventKind.expired.rawValue, let key = record.key, let generation = record.generation
                else { return true }
                if generations[key] == nil {
                    generations[key] = .some(try tx.item(key: key)?.generation ?? tx.retiredGeneration(key: key))
                }
                // Superseded when the key has moved on to a newer generation (a removal is not one).
                let current = generations[key] ?? nil
                return current.map { $0 <= generation } ?? true
            }
            return (deliverable.map(CountdownEvent.init), records.last?.id ?? id)
        }
    }
}
