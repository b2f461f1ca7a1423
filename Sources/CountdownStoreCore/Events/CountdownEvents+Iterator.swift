import Foundation
import Logging

extension CountdownEvents {
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
        /// has not handed out yet, and returns within the lease duration (at least a second)
        /// whatever the database does: what the database has not answered by then is left
        /// behind with a warning, and its claims run out by themselves. What it handed out stays
        /// its own until it is acknowledged, the claim runs out or the store closes, so that a
        /// stopping handler can still acknowledge what it finished.
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
                            // Timed from before the question: an answer that comes late has
                            // less time left than it says.
                            let asked = clock.bootMilliseconds
                            let remaining = try await store.claimRemaining(
                                consumer: consumer.consumer, claimant: consumer.name, eventID: buffer[bufferIndex].id)
                            retry.succeeded(store.configuration.logger)
                            if let remaining {
                                claimCheckBoot = asked + remaining / 2
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
                    if let consumer {
                        store.metrics.delivered(1, consumer: consumer.consumer)
                        consumer.handedOut(buffer[bufferIndex].id)
                    }
                    return buffer[bufferIndex]
                }
                var wait: Bool
                do {
                    if let consumer {
                        // The claim runs from the database's answer, which came after this: an
                        // answer that arrives late (a network path that healed) is checked
                        // before its first event is handed out, once half the claim has gone
                        // by as counted from here.
                        let asked = clock.bootMilliseconds
                        let claimed = try await store.claimEvents(
                            consumer: consumer.consumer, claimant: consumer.name, filter: filter, probing: probeFirst)
                        buffer = claimed ?? []
                        wait = claimed == nil
                        claimCheckBoot = asked + Swift.max(1, store.configuration.claimTimeout.milliseconds) / 2
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
                        // Woken by changes that may concern this reader: not by another
                        // group's expiry batches, when it reads one group.
                        try await store.changes.wait(
                            after: version, orUntilBoot: await wakeForExpiry(clock.bootMilliseconds + 250),
                            on: clock, forEventsOf: filter.group)
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

        /// When a reader with nothing to hand out looks again, at the latest `poll`: for a reader
        /// of expiries, also when the next countdown of its group comes due, and, while one is
        /// due and its expiry not recorded yet (another process's ticker records it), every few
        /// milliseconds, so that the expiry reaches it soon after the lease holder records it
        /// rather than at its next poll.
        private func wakeForExpiry(_ poll: Int64) async -> Int64 {
            let now = store.configuration.clock.bootMilliseconds
            // Told of expiries at once already: by this instance's own ticker, which holds the
            // lease, or by the database's notifications.
            let holding = store.state.withLock { ($0.leaseHeldUntilBoot ?? .min) > now }
            guard !holding, store.capabilities.changeNotices?.pushesForeignChanges != true,
                filter.kinds?.contains(.expired) ?? true, filter.key == nil,
                let due = try? await store.nextDeadlineBoot(group: filter.group)
            else { return poll }
            guard due <= now else { return Swift.min(poll, due + 1) }
            // Overdue for long: nobody records it now (no ticker runs); the poll will do.
            return now - due < Self.overdueWindowMs ? Swift.min(poll, now + Self.overduePollMs) : poll
        }

        /// How often a reader looks again while an expiry of its group is due and not recorded.
        static let overduePollMs: Int64 = 5
        /// For how long after a deadline a reader looks again that often.
        static let overdueWindowMs: Int64 = 1000
    }
}
