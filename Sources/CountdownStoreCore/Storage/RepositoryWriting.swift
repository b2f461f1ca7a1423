import Foundation

extension RepositoryWriting {
    package func insertNew(_ item: inout ItemRecord, lastWrite: Bool, thenAppend event: (ItemRecord) -> EventRecord)
        throws -> Bool
    {
        guard try insertNew(&item) else { return false }
        try append(event(item))
        return true
    }

    /// One ``append(_:)`` after another.
    package func append(all events: [EventRecord]) throws {
        for event in events { try append(event) }
    }

    /// One ``insertNew(_:)`` after another: for engines whose statements cost no round trip.
    package func insertNew(all items: inout [ItemRecord]) throws -> [Bool] {
        try items.indices.map { index in try insertNew(&items[index]) }
    }
}

/// Writes inside one transaction.
package protocol RepositoryWriting: RepositoryReading {
    /// Runs `body` in a savepoint: when it throws, what it wrote is rolled back and the rest of
    /// the transaction stays.
    func savepoint<T>(_ body: () throws -> T) throws -> T
    func save(_ checkpoint: Checkpoint, creating: Bool) throws
    /// Whether the store holds any countdown or event (see ``FirstClockRow``).
    func holdsItemsOrEvents() throws -> Bool
    func save(_ lease: Lease) throws
    /// Inserts `item` unless its key exists, continuing the generations of a removed key, and
    /// sets its `id` and `generation`; returns `false`, having changed nothing, when the key exists.
    func insertNew(_ item: inout ItemRecord) throws -> Bool
    /// ``insertNew(_:)``, then, if it inserted, appends `event` made from the item. `lastWrite`
    /// says that the transaction writes nothing after it, so an engine may send both in one
    /// statement (the server engine does).
    func insertNew(_ item: inout ItemRecord, lastWrite: Bool, thenAppend event: (ItemRecord) -> EventRecord) throws
        -> Bool
    /// ``insertNew(_:)`` for each of `items` (their keys all different), which an engine may send
    /// as one statement; returns, for each, whether it was inserted.
    func insertNew(all items: inout [ItemRecord]) throws -> [Bool]
    func update(_ item: ItemRecord) throws
    /// Deletes the item, remembering its generation so the key never reuses it.
    func delete(_ item: ItemRecord) throws
    func append(_ event: EventRecord) throws
    /// ``append(_:)`` for each of `events`, in order, which an engine may send as fewer statements.
    func append(all events: [EventRecord]) throws
    /// Creates consumer `name` with its cursor at `cursor`; leaves one that exists as it is (a
    /// writer running side by side may have created it since this transaction looked).
    func createConsumer(_ name: String, cursor: Int64, at wallMs: Int64) throws
    /// Moves a consumer's cursor forward to `id` (never back).
    func advanceConsumer(_ name: String, to id: Int64, at wallMs: Int64) throws
    /// Inserts or replaces a claim (by consumer and first event id).
    func save(_ claim: ConsumerClaim) throws
    /// Deletes a consumer's claims whose last event id is at most `id`.
    func deleteClaims(_ consumer: String, through id: Int64) throws
    /// Writes `items`, each just marked expired (``ItemRecord/expire(at:)``), then appends
    /// `events`: one statement for all where the engine can (the server engine does).
    func recordExpiries(_ items: [ItemRecord], events: [EventRecord]) throws
    /// Running countdowns of one policy due by `deadline`, in deadline order, at most `limit`,
    /// to record their expiries: locked until the transaction ends where writers run side by
    /// side, skipping rows another writer has locked (it is recording them).
    func dueForExpiry(policy: CountdownPolicy, dueBy deadline: Int64, limit: Int) throws -> [ItemRecord]
    /// The groups of running countdowns after `after` (`""`: from the first), in group order, at
    /// most `limit`, each with whether one of its countdowns is due by `dueBy` (on a timeline
    /// without a deadline there, none is): one seek a group, however many countdowns it holds.
    func runningGroups(after: String, limit: Int, dueBy: SoonestDeadlines) throws -> [(name: String, due: Bool)]
    /// Running countdowns of one policy due by `deadline` in each of `groups` (`nil`: those of no
    /// group), in deadline order within each, at most `limit` of each: locked as
    /// ``dueForExpiry(policy:dueBy:limit:)`` locks them.
    func dueForExpiry(policy: CountdownPolicy, dueBy deadline: Int64, groups: [String?], limit: Int) throws
        -> [ItemRecord]
    /// Deletes at most `limit` expired and cancelled items that ended before `cutoffMs`, oldest
    /// first, keeping each key's last generation in `countdown_retired_keys` as `delete` does;
    /// returns how many.
    func deleteItems(endedBefore cutoffMs: Int64, at nowMs: Int64, limit: Int) throws -> Int
    /// Deletes at most `limit` events among the oldest, recorded before `cutoffMs`, with an ID at
    /// most `throughID` (what every named consumer that holds retention back has passed);
    /// returns how many were deleted and whether older events than the cutoff may remain.
    func deleteEvents(before cutoffMs: Int64, throughID: Int64, limit: Int) throws -> (deleted: Int, more: Bool)
    /// Deletes at most `limit` rows of `countdown_retired_keys` removed before `cutoffMs` that
    /// no event remains of (the oldest event was recorded at or after their removal); returns how many.
    func deleteRetiredKeys(removedBefore cutoffMs: Int64, limit: Int) throws -> Int
}

extension RepositoryWriting {
    package func recordExpiries(_ items: [ItemRecord], events: [EventRecord]) throws {
        for item in items { try update(item) }
        for event in events { try append(event) }
    }

    package func dueForExpiry(policy: CountdownPolicy, dueBy deadline: Int64, limit: Int) throws -> [ItemRecord] {
        try running(policy: policy, dueBy: deadline, group: nil, limit: limit)
    }
}
