/// A write transaction as the store's logic sees it: the whole surface a write body has. Every
/// read and write goes to the engine's transaction; those that change items or append events
/// are noted on the way, so that, while a metrics backend is set, the events a transaction
/// appends are counted once it commits: never those of a savepoint rolled back. Without a
/// backend, each goes straight to the engine.
final class WriteTransaction: RepositoryWriting, DatabaseClockReading, RowLockingTransaction {
    /// The engine's transaction.
    private let engineTransaction: any RepositoryWriting
    /// The events appended so far; `nil` when nothing is metered.
    private(set) var tally: EventTally?
    /// The policy of each item this transaction wrote, for the events that name it.
    private var policies: [String: CountdownPolicy] = [:]

    /// The transaction `engineTransaction`, noting its events when `metered`.
    init(_ engineTransaction: any RepositoryWriting, metered: Bool) {
        self.engineTransaction = engineTransaction
        self.tally = metered ? EventTally() : nil
    }

    private func note(_ event: EventRecord) {
        tally?.entries.append(
            EventTally.Entry(
                kind: event.kind, policy: event.key.flatMap { policies[$0] }, group: event.group, lateMs: event.lateMs))
    }

    private func note(_ item: ItemRecord) {
        if tally != nil { policies[item.key] = item.policy }
    }

    /// Runs `body` in a savepoint (``RepositoryWriting/savepoint(_:)``); what it noted is
    /// forgotten when it throws.
    func savepoint<T>(_ body: () throws -> T) throws -> T {
        let mark = tally?.entries.count ?? 0
        do {
            return try engineTransaction.savepoint(body)
        } catch {
            tally?.entries.removeSubrange(mark...)
            throw error
        }
    }

    /// ``RepositoryWriting/insertNew(_:)``.
    func insertNew(_ item: inout ItemRecord) throws -> Bool {
        note(item)
        return try engineTransaction.insertNew(&item)
    }

    /// ``RepositoryWriting/insertNew(_:lastWrite:thenAppend:)``.
    func insertNew(_ item: inout ItemRecord, lastWrite: Bool, thenAppend event: (ItemRecord) -> EventRecord) throws
        -> Bool
    {
        note(item)
        return try engineTransaction.insertNew(&item, lastWrite: lastWrite) { inserted in
            let made = event(inserted)
            note(made)
            return made
        }
    }

    /// ``RepositoryWriting/insertNew(all:)``.
    func insertNew(all items: inout [ItemRecord]) throws -> [Bool] {
        items.forEach(note)
        return try engineTransaction.insertNew(all: &items)
    }

    /// ``RepositoryWriting/update(_:)``.
    func update(_ item: ItemRecord) throws {
        note(item)
        try engineTransaction.update(item)
    }

    /// ``RepositoryWriting/delete(_:)``.
    func delete(_ item: ItemRecord) throws {
        note(item)
        try engineTransaction.delete(item)
    }

    /// ``RepositoryWriting/append(_:)``.
    func append(_ event: EventRecord) throws {
        try engineTransaction.append(event)
        note(event)
    }

    /// ``RepositoryWriting/append(all:)``.
    func append(all events: [EventRecord]) throws {
        try engineTransaction.append(all: events)
        events.forEach(note)
    }

    /// ``RepositoryWriting/recordExpiries(_:events:)``.
    func recordExpiries(_ items: [ItemRecord], events: [EventRecord]) throws {
        try engineTransaction.recordExpiries(items, events: events)
        items.forEach(note)
        events.forEach(note)
    }

    // MARK: Operations the engine runs itself

    /// The engine's own operations (``StoredOperations``), where it has them.
    var storedOperations: (any StoredOperations)? { engineTransaction as? any StoredOperations }

    /// Notes what one of the engine's own operations wrote: `item`, then `events`.
    func noteStored(_ item: ItemRecord, events: [EventRecord]) {
        note(item)
        events.forEach(note)
    }

    // MARK: Forwarded as they are

    func checkpoint() throws -> Checkpoint? { try engineTransaction.checkpoint() }
    func lease() throws -> Lease { try engineTransaction.lease() }
    func clocks() throws -> (Checkpoint?, Lease, SoonestDeadlines) { try engineTransaction.clocks() }
    func items(_ listing: ItemListing, limit: Int) throws -> [ItemRecord] {
        try engineTransaction.items(listing, limit: limit)
    }
    func dueCounts(policy: CountdownPolicy, dueBy deadline: Int64) throws -> [(group: String?, count: Int)] {
        try engineTransaction.dueCounts(policy: policy, dueBy: deadline)
    }
    func counts() throws -> [CountRow] { try engineTransaction.counts() }
    func events(_ listing: EventListing, limit: Int) throws -> [EventRecord] {
        try engineTransaction.events(listing, limit: limit)
    }
    func lastEventID() throws -> Int64 { try engineTransaction.lastEventID() }
    func events(kinds: [String]?, group: String?, after id: Int64, through last: Int64?, limit: Int) throws -> (
        records: [EventRecord], readThrough: Int64
    ) {
        try engineTransaction.events(kinds: kinds, group: group, after: id, through: last, limit: limit)
    }
    func retiredGeneration(key: String) throws -> Int64? { try engineTransaction.retiredGeneration(key: key) }
    func consumers() throws -> [(name: String, cursor: Int64, updatedAtMs: Int64)] { try engineTransaction.consumers() }
    func items(keys: [String]) throws -> [ItemRecord] { try engineTransaction.items(keys: keys) }
    func consumerCursor(_ name: String) throws -> Int64? { try engineTransaction.consumerCursor(name) }
    func consumerClaims(_ name: String) throws -> [ConsumerClaim] { try engineTransaction.consumerClaims(name) }

    // MARK: The engine's capabilities, where it has them (asked for only then)

    func clockReading(_ local: ClockReading) throws -> ClockReading {
        try (engineTransaction as? any DatabaseClockReading)?.clockReading(local) ?? local
    }
    func databaseClockSkew(wall: Int64) -> Int64? {
        (engineTransaction as? any DatabaseClockReading)?.databaseClockSkew(wall: wall)
    }
    var databaseClockMs: Int64? { (engineTransaction as? any DatabaseClockReading)?.databaseClockMs }
    func withoutRowLocks<T>(_ body: () throws -> T) rethrows -> T {
        guard let engineTransaction = engineTransaction as? any RowLockingTransaction else { return try body() }
        return try engineTransaction.withoutRowLocks(body)
    }
    func lockClocks() throws { try (engineTransaction as? any RowLockingTransaction)?.lockClocks() }
    func save(_ checkpoint: Checkpoint, creating: Bool) throws {
        try engineTransaction.save(checkpoint, creating: creating)
    }
    func holdsItemsOrEvents() throws -> Bool { try engineTransaction.holdsItemsOrEvents() }
    func save(_ lease: Lease) throws { try engineTransaction.save(lease) }
    func createConsumer(_ name: String, cursor: Int64, at wallMs: Int64) throws {
        try engineTransaction.createConsumer(name, cursor: cursor, at: wallMs)
    }
    func advanceConsumer(_ name: String, to id: Int64, at wallMs: Int64) throws {
        try engineTransaction.advanceConsumer(name, to: id, at: wallMs)
    }
    func save(_ claim: ConsumerClaim) throws { try engineTransaction.save(claim) }
    func deleteClaims(_ consumer: String, through id: Int64) throws {
        try engineTransaction.deleteClaims(consumer, through: id)
    }
    func dueForExpiry(policy: CountdownPolicy, dueBy deadline: Int64, limit: Int) throws -> [ItemRecord] {
        try engineTransaction.dueForExpiry(policy: policy, dueBy: deadline, limit: limit)
    }
    func runningGroups(after: String, limit: Int, dueBy: SoonestDeadlines) throws -> [(name: String, due: Bool)] {
        try engineTransaction.runningGroups(after: after, limit: limit, dueBy: dueBy)
    }
    func dueForExpiry(policy: CountdownPolicy, dueBy deadline: Int64, groups: [String?], limit: Int) throws
        -> [ItemRecord]
    {
        try engineTransaction.dueForExpiry(policy: policy, dueBy: deadline, groups: groups, limit: limit)
    }
    func deleteItems(endedBefore cutoffMs: Int64, at nowMs: Int64, limit: Int) throws -> Int {
        try engineTransaction.deleteItems(endedBefore: cutoffMs, at: nowMs, limit: limit)
    }
    func deleteEvents(before cutoffMs: Int64, throughID: Int64, limit: Int) throws -> (deleted: Int, more: Bool) {
        try engineTransaction.deleteEvents(before: cutoffMs, throughID: throughID, limit: limit)
    }
    func deleteRetiredKeys(removedBefore cutoffMs: Int64, limit: Int) throws -> Int {
        try engineTransaction.deleteRetiredKeys(removedBefore: cutoffMs, limit: limit)
    }
}
