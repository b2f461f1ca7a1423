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

    /// A reader of a named consumer. When its iterator goes away (the loop ended: it finished,
    /// threw or broke off), what it claimed and did not acknowledge goes to other readers at once.
    final class Reader: Sendable {
        let store: CountdownStore
        let consumer: String
        let name: String
        /// Started when the reading task is cancelled: giving up the claims waits until then.
        let stop: StopDeadline
        private let released = Locked(false)

        init(store: CountdownStore, consumer: String) {
            self.store = store
            self.consumer = consumer
            name = store.newReaderName()
            stop = StopDeadline(bound: store.stopBound)
        }

        /// Releases the claims now (in a task of its own: the reading task is cancelled),
        /// waiting for it until the stop's deadline; what it could not give up is logged as a
        /// warning and goes to other readers when the claims run out.
        func release() async {
            let first = released.withLock { released in
                defer { released = true }
                return !released
            }
            // A reader of an instance that never claimed events of its consumer has none to give up.
            guard first, store.claimedConsumers().contains(consumer) else { return }
            stop.start()
            let (store, consumer, name) = (store, consumer, name)
            let releasing = Task { try await store.releaseClaims(consumer: consumer, reader: name) }
            let why: String
            var metadata: Logger.Metadata = ["consumer": "\(consumer)", "reader": "\(name)"]
            switch await BoundedWait.result(of: releasing, by: stop, passingCancellation: false) {
            case .success?:
                return
            case .failure(let error as CountdownError)? where error.code == .wrongState:
                return  // the store closed, which gave them up
            case .failure(let error)?:
                why = "the database cannot be reached"
                metadata["error"] = "\(error)"
            case nil:
                why = "no answer from the database within \(stop.bound)"
            }
            metadata["claim_timeout"] = "\(store.configuration.claimTimeout)"
            store.configuration.logger.warning(
                """
                could not give up the claims of a reader of consumer \(consumer) (\(why)); \
                they go to other readers when they run out
                """,
                metadata: metadata)
        }

        deinit {
            let (store, consumer, name) = (store, consumer, name)
            guard !released.withLock({ $0 }), store.claimedConsumers().contains(consumer) else { return }
            Task { try? await store.releaseClaims(consumer: consumer, reader: name) }
        }
    }

    /// Reads events in batches and waits for more when it has delivered them all.
    public struct Iterator: AsyncIteratorProtocol {
        let store: CountdownStore
        let filter: EventFilter
        var after: Int64
        var buffer: [CountdownEvent] = []
        var bufferIndex = 0
        /// The reader of a named consumer this iterator is.
        let consumer: Reader?
        /// The pauses after a lost connection.
        var retry = ConnectionRetry()
        /// The boot-clock instant after which the claimed events left in the buffer are checked
        /// to be still this reader's before one is handed out.
        var claimCheckBoot: Int64?
        /// Whether the next claim of a named consumer's reader reads first whether there is
        /// anything to claim (so that an idle reader polls without writing): not after a claim
        /// that found events, nor after a change this store was told of.
        var probeFirst = true

        /// Whether events already read wait to be handed out: the next ``next()`` returns one
        /// without reading the database (a reader may batch its own work, such as
        /// acknowledgements, until this turns false).
        public var hasBufferedEvents: Bool { bufferIndex < buffer.count }

        init(store: CountdownStore, filter: EventFilter, after: Int64, consumer: Reader?) {
            self.store = store
            self.filter = filter
            self.after = after
            self.consumer = consumer
        }

        /// After a failed read: returns `false` when the task is cancelled (whatever the read
        /// the stop interrupted reported, the sequence ends); throws `error` unless the
        /// connection was lost (a database server restarting), else waits before the same
        /// reader asks again, keeping what it has claimed. Returns `false` when the wait was
        /// cancelled.
        private mutating func pause(after error: CountdownError, version: UInt64) async throws -> Bool {
            if Task.isCancelled { return false }
            guard error.isTransient else { throw error }
            let delayMs = retry.failed(error, store.configuration.logger)
            let clock = store.configuration.clock
            do {
                try await store.changes.wait(after: version, orUntilBoot: clock.bootMilliseconds + delayMs, on: clock)
                return true
            } catch {
                return false
            }
        }

        /// The next event, waiting for it as long as needed; `nil` once the task is cancelled.
        ///
        /// A lost connection to the database (a database server restarting, a terminated
        /// session) does not end the sequence: it is logged as a warning and the read is tried
        /// again, 0.1 s later, then up to 1 s apart, until it succeeds.
        ///
        /// Once the task is cancelled, a reader of a named consumer gives up what it claimed and
        /// did not acknowledge, and returns within the lease duration (at least a second)
        /// whatever the database does: what the database has not answered by then is left
        /// behind with a warning, and its claims run out by themselves.
        ///
        /// - Throws: ``CountdownError`` when the database cannot be read for any other reason.
        public mutating func next() async throws -> CountdownEvent? {
            guard let consumer else { return try await nextEvent() }
            // A cancellation starts the reader's stop: from then on, an operation the database
            // does not answer and the release of the claims are waited for until its deadline.
            return try await withTaskCancellationHandler {
                try await nextEvent()
            } onCancel: {
                consumer.stop.start()
            }
        }

        private mutating func nextEvent() async throws -> CountdownEvent? {
            while !Task.isCancelled {
                let version = store.changes.version
                let clock = store.configuration.clock
                if bufferIndex < buffer.count {
                    if let consumer, let check = claimCheckBoot, clock.bootMilliseconds >= check {
                        // Long after the claim was taken (this reader stalled, or its handler
                        // is slow): make sure the rest is still this reader's, so that what
                        // another reader took over meanwhile is not handed out twice.
                        do {
                            let remaining = try await store.claimRemaining(
                                consumer: consumer.consumer, claimant: consumer.name, eventID: buffer[bufferIndex].id)
                            retry.succeeded(store.configuration.logger)
                            if let remaining {
                                claimCheckBoot = clock.bootMilliseconds + remaining / 2
                            } else {
                                buffer = []
                                bufferIndex = 0
                                claimCheckBoot = nil
                                continue
                            }
                        } catch {
                            guard try await pause(after: error, version: version) else { break }
                            continue
                        }
                    }
                    defer { bufferIndex += 1 }
                    if let consumer { store.metrics.delivered(1, consumer: consumer.consumer) }
                    return buffer[bufferIndex]
                }
                var wait: Bool
                do {
                    if let consumer {
                        let claimed = try await store.claimEvents(
                            consumer: consumer.consumer, claimant: consumer.name, filter: filter, probing: probeFirst)
                        buffer = claimed ?? []
                        wait = claimed == nil
                        claimCheckBoot =
                            clock.bootMilliseconds + Swift.max(1, store.configuration.claimTimeout.milliseconds) / 2
                    } else {
                        let (events, last) = try await store.deliverableEvents(after: after, filter: filter, limit: 256)
                        after = last
                        buffer = events
                        wait = events.isEmpty
                    }
                    retry.succeeded(store.configuration.logger)
                } catch {
                    guard try await pause(after: error, version: version) else { break }
                    continue
                }
                bufferIndex = 0
                // The next claim looks before it writes only after a wait that nothing ended.
                probeFirst = false
                if wait {
                    do {
                        try await store.changes.wait(
                            after: version, orUntilBoot: clock.bootMilliseconds + 250, on: clock)
                    } catch {
                        break
                    }
                    probeFirst = store.changes.version == version
                }
            }
            if let consumer {
                // What this reader claimed and did not acknowledge goes to the other readers now.
                await consumer.release()
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
