/// A write transaction that notes every event it appends, so that the store's metrics count
/// them once the transaction commits, and never those of a savepoint rolled back. Everything
/// else goes to the engine's transaction as it is. Used only while a metrics backend is set.
final class MeteredTransaction: RepositoryWriting {
    let base: any RepositoryWriting
    private(set) var tally = EventTally()
    /// The policy of each item this transaction wrote, for the events that name it.
    private var policies: [String: CountdownPolicy] = [:]

    init(_ base: any RepositoryWriting) {
        self.base = base
    }

    private func note(_ event: EventRecord) {
        tally.entries.append(
            EventTally.Entry(
                kind: event.kind, policy: event.key.flatMap { policies[$0] }, group: event.group, lateMs: event.lateMs))
    }

    private func note(_ item: ItemRecord) {
        policies[item.key] = item.policy
    }

    // MARK: Writing

    func savepoint<T>(_ body: () throws -> T) throws -> T {
        let mark = tally.entries.count
        do {
            return try base.savepoint(body)
        } catch {
            tally.entries.removeSubrange(mark...)
            throw error
        }
    }

    func lockClocks() throws { try base.lockClocks() }
    func save(_ checkpoint: Checkpoint, creating: Bool) throws { try base.save(checkpoint, creating: creating) }
    func holdsItemsOrEvents() throws -> Bool { try base.holdsItemsOrEvents() }
    func save(_ lease: Lease) throws { try base.save(lease) }

    func insertNew(_ item: inout ItemRecord) throws -> Bool {
        note(item)
        return try base.insertNew(&item)
    }

    func insertNew(_ item: inout ItemRecord, lastWrite: Bool, thenAppend event: (ItemRecord) -> EventRecord) throws
        -> Bool
    {
        note(item)
        return try base.insertNew(&item, lastWrite: lastWrite) { inserted in
            let made = event(inserted)
            note(made)
            return made
        }
    }

    func insertNew(all items: inout [ItemRecord]) throws -> [Bool] {
        items.forEach(note)
        return try base.insertNew(all: &items)
    }

    func update(_ item: ItemRecord) throws {
        note(item)
        try base.update(item)
    }

    func delete(_ item: ItemRecord) throws {
        note(item)
        try base.delete(item)
    }

    func append(_ event: EventRecord) throws {
        try base.append(event)
        note(event)
    }

    func createConsumer(_ name: String, cursor: Int64, at wallMs: Int64) throws {
        try base.createConsumer(name, cursor: cursor, at: wallMs)
    }

    func advanceConsumer(_ name: String, to id: Int64, at wallMs: Int64) throws {
        try base.advanceConsumer(name, to: id, at: wallMs)
    }

    func save(_ claim: ConsumerClaim) throws { try base.save(claim) }
    func deleteClaims(_ consumer: String, through id: Int64) throws { try base.deleteClaims(consumer, through: id) }

    func recordExpiries(_ items: [ItemRecord], events: [EventRecord]) throws {
        try base.recordExpiries(items, events: events)
        items.forEach(note)
        events.forEach(note)
    }

    func dueForExpiry(policy: CountdownPolicy, dueBy deadline: Int64, limit: Int) throws -> [ItemRecord] {
        try base.dueForExpiry(policy: policy, dueBy: deadline, limit: limit)
    }

    func deleteItems(endedBefore cutoffMs: Int64, at nowMs: Int64, limit: Int) throws -> Int {
        try base.deleteItems(endedBefore: cutoffMs, at: nowMs, limit: limit)
    }

    func deleteEvents(before cutoffMs: Int64, throughID: Int64, limit: Int) throws -> (deleted: Int, more: Bool) {
        try base.deleteEvents(before: cutoffMs, throughID: throughID, limit: limit)
    }

    func deleteRetiredKeys(removedBefore cutoffMs: Int64, limit: Int) throws -> Int {
        try base.deleteRetiredKeys(removedBefore: cutoffMs, limit: limit)
    }

    // MARK: Reading

    func checkpoint() throws -> Checkpoint? { try base.checkpoint() }
    func lease() throws -> Lease { try base.lease() }
    func clocks() throws -> (Checkpoint?, Lease, SoonestDeadlines) { try base.clocks() }
    func item(key: String) throws -> ItemRecord? { try base.item(key: key) }
    func items(_ listing: ItemListing, limit: Int) throws -> [ItemRecord] { try base.items(listing, limit: limit) }

    func dueCounts(policy: CountdownPolicy, dueBy deadline: Int64) throws -> [(group: String?, count: Int)] {
        try base.dueCounts(policy: policy, dueBy: deadline)
    }

    func counts() throws -> [CountRow] { try base.counts() }
    func events(afterID: Int64, limit: Int) throws -> [EventRecord] { try base.events(afterID: afterID, limit: limit) }
    func lastEventID() throws -> Int64 { try base.lastEventID() }
    func retiredGeneration(key: String) throws -> Int64? { try base.retiredGeneration(key: key) }
    func recentEvents(kinds: [String]?, limit: Int) throws -> [EventRecord] {
        try base.recentEvents(kinds: kinds, limit: limit)
    }

    func recentEvents(key: String, window: Int, limit: Int) throws -> [EventRecord] {
        try base.recentEvents(key: key, window: window, limit: limit)
    }

    func consumers() throws -> [(name: String, cursor: Int64, updatedAtMs: Int64)] { try base.consumers() }
    func items(keys: [String]) throws -> [ItemRecord] { try base.items(keys: keys) }
    func consumerCursor(_ name: String) throws -> Int64? { try base.consumerCursor(name) }
    func consumerClaims(_ name: String) throws -> [ConsumerClaim] { try base.consumerClaims(name) }
    func clockReading(_ local: ClockReading) throws -> ClockReading { try base.clockReading(local) }
    func databaseClockSkew(wall: Int64) -> Int64? { base.databaseClockSkew(wall: wall) }
    func withoutRowLocks<T>(_ body: () throws -> T) rethrows -> T { try base.withoutRowLocks(body) }
}
