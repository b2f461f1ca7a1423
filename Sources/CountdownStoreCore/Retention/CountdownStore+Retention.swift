import Foundation

extension CountdownStore {
    /// Deletes expired and cancelled items that ended more than `age` ago, events older than
    /// `age` that every named consumer has passed, and the retired keys nothing refers to any more.
    ///
    /// The work goes in batches of ``Retention/batchSize`` rows (from
    /// ``Configuration/retention``), each its own short transaction, oldest first, with a pause of
    /// 2 ms after every fourth, so that other processes' reads and writes go between them however
    /// much there is to delete. A named
    /// consumer unread for longer than ``Retention/staleConsumer`` does not hold events back.
    ///
    /// - Parameters:
    ///   - age: how old an ended item or an event must be, 1 ms to 100 years.
    ///   - progress: called after each batch with the totals so far.
    /// - Returns: how many rows of each kind were deleted.
    /// - Throws: ``CountdownError/Code/invalidDuration`` for an age out of range (nothing is deleted).
    @discardableResult
    public func prune(
        olderThan age: Duration, progress: (@Sendable (PruneResult) -> Void)? = nil
    ) async throws(CountdownError) -> PruneResult {
        let ageMs = try Validate.duration(age, what: "age")
        return try await prune(endedItemsMs: ageMs, eventsMs: ageMs, progress: progress)
    }

    /// One pass of ``Configuration/retention``: what the lease holder's ticker runs every
    /// ``Retention/interval``. Does nothing under ``Retention/keepEverything``.
    @discardableResult
    public func applyRetention() async throws(CountdownError) -> PruneResult {
        let retention = configuration.retention
        guard retention.prunes else { return PruneResult(items: 0, events: 0) }
        return try await prune(
            endedItemsMs: retention.endedItems.map { max(1, $0.milliseconds) },
            eventsMs: retention.events.map { max(1, $0.milliseconds) }, progress: nil)
    }

    /// Deletes in batches: ended items older than `endedItemsMs`, events older than `eventsMs`
    /// and passed by every consumer that holds retention back, then retired keys (`nil`: keep).
    ///
    /// With the engine's upkeep running meanwhile (a running ticker's, or one for this prune),
    /// as a ticker's backlog has it: where the engine keeps a log of its own (a store's own file),
    /// it is folded in beside the batches and started over when it grows, rather than growing by
    /// all of them. A log grown by a million deletions (near a gigabyte) is folded in whole by the
    /// last connection to close the file, which holds every other process back meanwhile.
    private func prune(
        endedItemsMs: Int64?, eventsMs: Int64?, progress: (@Sendable (PruneResult) -> Void)?
    ) async throws(CountdownError) -> PruneResult {
        // Without it (it could not start), the prune goes on as it would on a host's file.
        let upkeep = (try? await startUpkeep()) ?? nil
        do {
            let result = try await prune(
                endedItemsMs: endedItemsMs, eventsMs: eventsMs, progress: progress,
                spacing: BatchSpacing(upkeep: upkeep))
            if upkeep != nil { await releaseUpkeep() }
            return result
        } catch {
            if upkeep != nil { await releaseUpkeep() }
            throw error
        }
    }

    private func prune(
        endedItemsMs: Int64?, eventsMs: Int64?, progress: (@Sendable (PruneResult) -> Void)?, spacing: BatchSpacing
    ) async throws(CountdownError) -> PruneResult {
        let retention = configuration.retention
        let batch = max(1, retention.batchSize)
        let staleMs = retention.staleConsumer.map { max(1, $0.milliseconds) }
        var total = PruneResult(items: 0, events: 0)
        var spacing = spacing
        let cutoffs = try await reading { _, now in
            (items: endedItemsMs.map { now.wall - $0 }, events: eventsMs.map { now.wall - $0 }, now: now.wall)
        }
        if let cutoff = cutoffs.items {
            while true {
                let deleted = try await writing(.prune, notifies: false) { tx, time in
                    try tx.deleteItems(endedBefore: cutoff, at: time.wall, limit: batch)
                }
                total.items += deleted
                metrics.pruned(items: deleted, events: 0, retiredKeys: 0)
                if deleted > 0 { progress?(total) }
                if deleted < batch { break }
                await spacing.next(self)
            }
        }
        if let cutoff = cutoffs.events {
            let horizon = try await eventHorizon(staleAfterMs: staleMs)
            while true {
                let (deleted, more) = try await writing(.prune, notifies: false) { tx, _ in
                    try tx.deleteEvents(before: cutoff, throughID: horizon, limit: batch)
                }
                total.events += deleted
                metrics.pruned(items: 0, events: deleted, retiredKeys: 0)
                if deleted > 0 { progress?(total) }
                if !more { break }
                await spacing.next(self)
            }
            while true {
                let deleted = try await writing(.prune, notifies: false) { tx, _ in
                    try tx.deleteRetiredKeys(removedBefore: cutoff, limit: batch)
                }
                total.retiredKeys += deleted
                metrics.pruned(items: 0, events: 0, retiredKeys: deleted)
                if deleted > 0 { progress?(total) }
                if deleted < batch { break }
                await spacing.next(self)
            }
        }
        if total.items + total.events + total.retiredKeys > 0 {
            let result = total
            try await writing(.prune) { tx, time in
                try tx.append(
                    EventRecord(
                        .pruned, at: time,
                        detail: [
                            "items": Int64(result.items), "events": Int64(result.events),
                            "retired_keys": Int64(result.retiredKeys),
                        ]))
            }
        }
        return total
    }

    /// The last event ID every named consumer that holds retention back has passed: all of them
    /// but those unread for longer than `staleAfterMs`. A consumer left out this way is named in
    /// a warning and a `consumer_stale` event, once per store instance.
    private func eventHorizon(staleAfterMs: Int64?) async throws(CountdownError) -> Int64 {
        let logger = configuration.logger
        return try await writing(.prune, notifies: false) { tx, time in
            var horizon = Int64.max
            for consumer in try tx.consumers() {
                if let staleAfterMs, consumer.updatedAtMs < time.wall - staleAfterMs {
                    guard self.noteStale(consumer.name) else { continue }
                    logger.warning(
                        """
                        named consumer unread for too long no longer holds events back; \
                        events it has not read may be deleted
                        """,
                        metadata: [
                            "consumer": "\(consumer.name)", "cursor": "\(consumer.cursor)",
                            "unread_since": "\(StoreTime.iso8601(milliseconds: consumer.updatedAtMs))",
                        ])
                    var event = EventRecord(
                        .consumerStale, at: time,
                        detail: ["cursor": consumer.cursor, "unread_since_ms": consumer.updatedAtMs])
                    event.detail = Self.detail(event.detail, adding: "consumer", text: consumer.name)
                    try tx.append(event)
                    continue
                }
                horizon = min(horizon, consumer.cursor)
            }
            return horizon
        }
    }

    /// Between batches of a deletion: a pause for other processes' writes after every fourth
    /// (a batch of deletions is short: four of them hold the lock for a few milliseconds).
    private struct BatchSpacing {
        /// The engine's upkeep, told of each batch (it may hold the next one briefly).
        let upkeep: (any EngineUpkeep)?
        var batches = 0

        mutating func next(_ store: CountdownStore) async {
            batches += 1
            await upkeep?.betweenBatches()
            if batches % 4 == 0 { await store.leaveWritesToOthers() } else { await Task.yield() }
        }
    }

    /// `detail`, a JSON object, with one more field holding `text` as a JSON string.
    private static func detail(_ detail: String?, adding name: String, text: String) -> String {
        let encoded = (try? JSONEncoder().encode(text)).flatMap { String(data: $0, encoding: .utf8) } ?? "\"\""
        guard let detail, detail.hasPrefix("{"), detail.count > 2 else { return "{\"\(name)\":\(encoded)}" }
        return "{\"\(name)\":\(encoded)," + detail.dropFirst()
    }
}
