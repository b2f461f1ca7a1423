import Foundation

// A named consumer may have several readers: tasks of one process, processes on one database
// file, hosts on one database server. Each reader takes a claim on the next range of events (its
// row in `countdown_consumer_claims`), so each event goes to one reader. An acknowledgement marks
// the claim handled up to that event and renews it; a claim that runs out (its reader died, or
// is stuck for longer than `claimTimeout`) goes, from its first unacknowledged event, to the next
// reader that asks. The consumer's cursor moves past every range acknowledged in full, up to the
// first one that is not.
//
// Claims are timed on one clock every reader shares: the database's own where it has one (a
// server's, read in the claim's own transaction), else the machine's system clock (every process
// on one database file reads the same). Never on a host's store wall clock, on which two hosts may
// disagree. An acknowledgement is fenced: it counts only from the reader that holds the claim on
// its event, until another reader takes that claim over; a stale one changes nothing.

extension CountdownStore {
    /// How many events a reader claims at a time, at most.
    static let claimBatch = 512

    /// How often, at most, a reader of some kinds or of one group that found nothing of its own
    /// claims other kinds' and groups' events as handled, to move its cursor past them: one
    /// write a second at most, however busy the others are.
    static let othersPassedEveryMs: Int64 = 1000

    /// The next events for the reader `claimant` of the consumer `name`: the unacknowledged rest
    /// of a claim that ran out, or else a new claim on the events after every other claim. Each
    /// event carries its claimant, so that its acknowledgement is fenced to the claim.
    /// `nil` when there is nothing to claim (the reader waits); an empty array when the claimed
    /// range held nothing `filter` lets through (the reader asks again at once).
    func claimEvents(
        consumer name: String, claimant: String, filter: EventFilter, probing: Bool = true
    ) async throws(CountdownError) -> [CountdownEvent]? {
        // A read first, so that an idle reader polls without writing; a reader told of a
        // change (events written, as likely as not) claims at once.
        // A reader of some kinds or of one group always looks first, through the indexes: the
        // changes that wake it are mostly other kinds' and other groups' events.
        if probing || filter.readsByIndex {
            let claimable = try await reading(events: true) { tx, now in
                let claims = try tx.consumerClaims(name)
                let clockMs = self.claimClockMs(tx, now)
                if claims.contains(where: { !$0.complete && $0.claimedUntilMs <= clockMs }) { return true }
                let after = Self.claimedThrough(claims, cursor: try tx.consumerCursor(name) ?? 0)
                let last = try tx.lastEventID()
                guard filter.readsByIndex else { return last > after }
                // Its own events; or others', to move its cursor past them (a cursor held back
                // looks behind, and holds retention back), at most once a second.
                if last > after && self.passesOthers(name) { return true }
                if try !tx.events(kinds: filter.kindNames, group: filter.group, after: after, through: last, limit: 1)
                    .records.isEmpty
                {
                    return true
                }
                guard !probing else { return false }
                // Told of a change: a claim also records the expiries that came due while no
                // ticker holds the lease (as every write does), which may be this reader's.
                let (_, lease, soonest) = try tx.clocks()
                return soonest.anyDue(at: now) && !(lease.holder != nil && lease.expiresAtMs > now.wall)
            }
            guard claimable else { return nil }
        }
        noteClaims(of: name)
        let timeoutMs = max(1, configuration.claimTimeout.milliseconds)
        return try await writing(.consumer, notifies: false, leavingExpiriesToHolder: true) { tx, now in
            if let stored = tx.storedOperations {
                // The engine's own claim: the one other languages make.
                let records = try stored.claim(
                    consumer: name, claimant: claimant, maxEvents: Self.claimBatch,
                    clockMs: self.claimClockMs(tx, now), timeoutMs: timeoutMs, wallMs: now.wall,
                    kinds: filter.kindNames, group: filter.group, key: filter.key)
                guard !records.isEmpty else { return nil }
                return records.map { record in
                    var given = CountdownEvent(record)
                    given.claimant = claimant
                    return given
                }
            }
            // The consumer's row, locked: readers of one consumer claim one after another.
            guard let cursor = try tx.consumerCursor(name) else { return nil }
            var claims = try tx.consumerClaims(name)
            let clockMs = self.claimClockMs(tx, now)
            let records: [EventRecord]
            // Every event up to this one was read (those of other kinds and groups skipped).
            let readThrough: Int64
            let index: Int
            if let lapsed = claims.firstIndex(where: { !$0.complete && $0.claimedUntilMs <= clockMs }) {
                // Its reader died or is stuck: the rest of its range goes to this one.
                index = lapsed
                let claim = claims[index]
                (records, readThrough) = try tx.events(
                    kinds: filter.kindNames, group: filter.group, after: claim.ackedThrough, through: claim.lastID,
                    limit: Self.claimBatch)
            } else {
                let after = Self.claimedThrough(claims, cursor: cursor)
                (records, readThrough) = try tx.events(
                    kinds: filter.kindNames, group: filter.group, after: after, through: nil, limit: Self.claimBatch)
                guard readThrough > after else { return nil }
                claims.append(
                    ConsumerClaim(
                        consumer: name, firstID: after + 1, lastID: readThrough, ackedThrough: after,
                        claimant: claimant, claimedUntilMs: 0))
                index = claims.count - 1
            }
            let readAll = readThrough >= claims[index].lastID
            // The items are read without locks: this transaction holds the consumer's row, and
            // writers lock items before they come to it (every write records due expiries first).
            let events = try self.capabilities.withoutRowLocks(in: tx) {
                try Self.deliverable(records, filter: filter, tx)
            }.map { event in
                var given = event
                given.claimant = claimant
                return given
            }
            claims[index].claimant = claimant
            claims[index].claimedUntilMs = clockMs + timeoutMs
            if let last = events.last, claims[index].lastID > last.id {
                // The range ends at its last event for a reader: the rest is left for the next
                // claim, or, behind a lapsed claim, a claim of its own, handled as far as it was
                // read (nothing there for a reader) and free for the next reader to go on.
                if index < claims.count - 1 {
                    let rest = ConsumerClaim(
                        consumer: name, firstID: last.id + 1, lastID: claims[index].lastID,
                        ackedThrough: min(readThrough, claims[index].lastID), claimant: claimant,
                        claimedUntilMs: clockMs)
                    try tx.save(rest)
                    claims.append(rest)
                }
                claims[index].lastID = last.id
            } else if events.isEmpty {
                // Nothing for a reader: handled as far as it was read; the rest of a lapsed
                // claim stays free for the next reader.
                claims[index].ackedThrough = min(readThrough, claims[index].lastID)
                if !readAll { claims[index].claimedUntilMs = clockMs }
            }
            try tx.save(claims[index])
            try Self.moveCursor(name, claims, stored: cursor, atLeast: cursor, tx, now)
            return events
        }
    }

    /// How long the claim of reader `claimant` on event `id` of consumer `name` still runs (ms
    /// on the clock claims are timed on, as the database sees it now); `nil` when it has run out
    /// or another reader holds it.
    func claimRemaining(consumer name: String, claimant: String, eventID id: Int64) async throws(CountdownError)
        -> Int64?
    {
        try await reading { tx, now in
            let clockMs = self.claimClockMs(tx, now)
            guard let claim = try tx.consumerClaims(name).first(where: { $0.firstID <= id && id <= $0.lastID }),
                claim.claimant == claimant, !claim.complete, claim.claimedUntilMs > clockMs
            else { return nil }
            return claim.claimedUntilMs - clockMs
        }
    }

    /// Records that the reader `claimant` handled the events of its claim up to `id`, and renews
    /// the claim. Returns `false`, having changed nothing, when the acknowledgement is stale:
    /// `claimant` does not hold the claim on `id` (another reader took it over, or `id` was
    /// acknowledged and passed already). A reader's acknowledgement never moves the cursor past
    /// an event it was not given.
    ///
    /// With no claimant, records that every event up to `id` was handled, whoever claimed it,
    /// and moves the cursor there: a skip asked for by name, never past the last event written
    /// (`false` when `id` is not after the cursor or was never issued).
    func acknowledge(consumer name: String, eventID id: Int64, claimant: String?) async throws(CountdownError)
        -> Bool
    {
        try await run(acknowledgePlan(consumer: name, eventID: id, claimant: claimant))
    }

    /// The plan of ``acknowledge(consumer:eventID:claimant:)``, for the store's own transaction
    /// or the host's: a write of its own (not grouped), which leaves due expiries to a live
    /// lease holder.
    func acknowledgePlan(consumer name: String, eventID id: Int64, claimant: String?) -> WritePlan<Bool> {
        WritePlan(.consumer, grouped: false, leavesExpiriesToHolder: true, notifies: false) { tx, now in
            try self.acknowledge(consumer: name, eventID: id, claimant: claimant, tx, now)
        }
    }

    /// ``acknowledge(consumer:eventID:claimant:)`` in the write transaction `tx`, which locks
    /// the consumer's row first: acknowledgements and claims of one consumer take turns.
    private func acknowledge(
        consumer name: String, eventID id: Int64, claimant: String?, _ tx: WriteTransaction, _ now: ClocksNow
    ) throws -> Bool {
        if let claimant, let stored = tx.storedOperations {
            // The engine's own acknowledgement, fenced: the one other languages make.
            return try stored.acknowledge(
                consumer: name, claimant: claimant, eventID: id, clockMs: claimClockMs(tx, now),
                timeoutMs: max(1, configuration.claimTimeout.milliseconds), wallMs: now.wall)
        }
        guard let cursor = try tx.consumerCursor(name) else { return false }
        var claims = try tx.consumerClaims(name)
        guard let claimant else {
            // Every event up to `id`, whoever holds it: a skip the caller asks for by name,
            // never past the last event written (an id not issued yet is not skipped ahead of).
            guard id > cursor, id <= (try tx.lastEventID()) else { return false }
            for index in claims.indices where claims[index].firstID <= id && claims[index].ackedThrough < id {
                claims[index].ackedThrough = min(id, claims[index].lastID)
                try tx.save(claims[index])
            }
            let floor = id > Self.claimedThrough(claims, cursor: cursor) ? id : cursor
            try Self.moveCursor(name, claims, stored: cursor, atLeast: floor, tx, now)
            return true
        }
        // Fenced: the claim on `id` must be this reader's. A claim that ran out stays its
        // reader's until another takes it over (both lock the consumer's row, so one goes first).
        guard let owner = claims.firstIndex(where: { $0.firstID <= id && id <= $0.lastID }),
            claims[owner].claimant == claimant
        else { return false }
        guard claims[owner].ackedThrough < id else { return true }  // acknowledged already, by this reader
        claims[owner].ackedThrough = id
        claims[owner].claimedUntilMs = claimClockMs(tx, now) + max(1, configuration.claimTimeout.milliseconds)
        try tx.save(claims[owner])
        try Self.moveCursor(name, claims, stored: cursor, atLeast: cursor, tx, now)
        return true
    }

    /// Lets other readers have at once what readers of this instance claimed and did not
    /// acknowledge: of `consumer`, the reader `reader` (when a reader stops); of every consumer,
    /// every reader (when the store closes).
    ///
    /// With `keepingThrough`, the reader keeps every claim that holds an event it was given up to
    /// that id and has not acknowledged: it may still acknowledge it (the claim runs on as
    /// before, until the store closes or it runs out); every other claim goes to other readers.
    func releaseClaims(consumer: String? = nil, reader: String? = nil, keepingThrough kept: Int64? = nil)
        async throws(CountdownError)
    {
        let names = consumer.map { [$0] } ?? claimedConsumers()
        guard !names.isEmpty else { return }
        let prefix = instanceID + ":"
        try await writing(.consumer, notifies: false, leavingExpiriesToHolder: true) { tx, now in
            let clockMs = self.claimClockMs(tx, now)
            for name in names {
                guard try tx.consumerCursor(name) != nil else { continue }
                for var claim in try tx.consumerClaims(name)
                where !claim.complete && claim.claimedUntilMs > clockMs
                    && (reader.map { claim.claimant == $0 } ?? claim.claimant.hasPrefix(prefix))
                {
                    // Kept whole while it holds an event given out and not acknowledged: the
                    // reader may still acknowledge it, and an acknowledgement covers every event
                    // of the claim before it.
                    if let kept, claim.firstID <= kept, claim.ackedThrough < kept { continue }
                    claim.claimedUntilMs = clockMs
                    try tx.save(claim)
                }
            }
        }
    }

    /// Whether a reader of `consumer` that found no event of its own may claim others' now, to
    /// move the cursor past them: at most once every ``othersPassedEveryMs`` on this instance.
    private func passesOthers(_ consumer: String) -> Bool {
        let nowMs = configuration.clock.bootMilliseconds
        return state.withLock { memory in
            if let last = memory.othersPassed[consumer], nowMs - last < Self.othersPassedEveryMs { return false }
            memory.othersPassed[consumer] = nowMs
            return true
        }
    }

    /// The clock claims are timed on, now, in transaction `tx`: the database's own where it has
    /// one, as this transaction read it; else this machine's system clock, which every process
    /// on the database file shares. Never the store wall clock, which is a host's.
    func claimClockMs(_ tx: any RepositoryReading, _ now: ClocksNow) -> Int64 {
        capabilities.databaseClockMs(in: tx) ?? now.reading?.system ?? configuration.clock.systemMilliseconds
    }

    /// Everything up to this id is claimed or acknowledged.
    private static func claimedThrough(_ claims: [ConsumerClaim], cursor: Int64) -> Int64 {
        max(cursor, claims.map(\.lastID).max() ?? 0)
    }

    /// Moves the consumer's cursor (`stored`, or `floor` when further) past every claim
    /// acknowledged in full, up to the first one that is not, and forgets those claims.
    private static func moveCursor(
        _ name: String, _ claims: [ConsumerClaim], stored: Int64, atLeast floor: Int64, _ tx: WriteTransaction,
        _ now: ClocksNow
    ) throws {
        var moved = max(stored, floor)
        for claim in claims.sorted(by: { $0.firstID < $1.firstID }) where claim.lastID > moved {
            if claim.firstID > moved + 1 { break }  // a range nobody claimed lies between
            moved = max(moved, claim.ackedThrough)
            if !claim.complete { break }
        }
        guard moved > stored else { return }
        try tx.deleteClaims(name, through: moved)
        try tx.advanceConsumer(name, to: moved, at: now.wall)
    }

    /// The records that `filter` lets through, leaving out expiries superseded by a newer generation.
    static func deliverable(_ records: [EventRecord], filter: EventFilter, _ tx: any RepositoryReading) throws
        -> [CountdownEvent]
    {
        let matching = records.filter(filter.matches)
        // The current generation of every key with an expiry here, read together: one query
        // for a batch, not one per event.
        var keys: Set<String> = []
        for record in matching where record.kind == EventKind.expired.rawValue && record.generation != nil {
            if let key = record.key { keys.insert(key) }
        }
        var generations: [String: Int64] = [:]
        for item in try tx.items(keys: Array(keys)) { generations[item.key] = item.generation }
        for key in keys where generations[key] == nil {
            generations[key] = try tx.retiredGeneration(key: key)
        }
        return matching.filter { record in
            guard record.kind == EventKind.expired.rawValue, let key = record.key, let generation = record.generation
            else { return true }
            // Superseded when the key has moved on to a newer generation (a removal is not one).
            return generations[key].map { $0 <= generation } ?? true
        }.map(CountdownEvent.init)
    }
}
