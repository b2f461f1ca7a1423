/// A write transaction as the store's logic sees it: the engine's transaction, ``rows``, for
/// every read and for the writes of the clocks, the lease and the consumers; and, here, the
/// writes that change items or append events.
///
/// Those go through this type so that, while a metrics backend is set, the events a transaction
/// appends are noted, and counted once it commits: never those of a savepoint rolled back.
/// Without a backend, each goes straight to the engine.
final class WriteTransaction {
    /// The engine's transaction.
    let rows: any RepositoryWriting
    /// The events appended so far; `nil` when nothing is metered.
    private(set) var tally: EventTally?
    /// The policy of each item this transaction wrote, for the events that name it.
    private var policies: [String: CountdownPolicy] = [:]

    /// The transaction `rows`, noting its events when `metered`.
    init(_ rows: any RepositoryWriting, metered: Bool) {
        self.rows = rows
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
            return try rows.savepoint(body)
        } catch {
            tally?.entries.removeSubrange(mark...)
            throw error
        }
    }

    /// ``RepositoryWriting/insertNew(_:)``.
    func insertNew(_ item: inout ItemRecord) throws -> Bool {
        note(item)
        return try rows.insertNew(&item)
    }

    /// ``RepositoryWriting/insertNew(_:lastWrite:thenAppend:)``.
    func insertNew(_ item: inout ItemRecord, lastWrite: Bool, thenAppend event: (ItemRecord) -> EventRecord) throws
        -> Bool
    {
        note(item)
        return try rows.insertNew(&item, lastWrite: lastWrite) { inserted in
            let made = event(inserted)
            note(made)
            return made
        }
    }

    /// ``RepositoryWriting/insertNew(all:)``.
    func insertNew(all items: inout [ItemRecord]) throws -> [Bool] {
        items.forEach(note)
        return try rows.insertNew(all: &items)
    }

    /// ``RepositoryWriting/update(_:)``.
    func update(_ item: ItemRecord) throws {
        note(item)
        try rows.update(item)
    }

    /// ``RepositoryWriting/delete(_:)``.
    func delete(_ item: ItemRecord) throws {
        note(item)
        try rows.delete(item)
    }

    /// ``RepositoryWriting/append(_:)``.
    func append(_ event: EventRecord) throws {
        try rows.append(event)
        note(event)
    }

    /// ``RepositoryWriting/append(all:)``.
    func append(all events: [EventRecord]) throws {
        try rows.append(all: events)
        events.forEach(note)
    }

    /// ``RepositoryWriting/recordExpiries(_:events:)``.
    func recordExpiries(_ items: [ItemRecord], events: [EventRecord]) throws {
        try rows.recordExpiries(items, events: events)
        items.forEach(note)
        events.forEach(note)
    }
}
