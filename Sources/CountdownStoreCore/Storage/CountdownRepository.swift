import Foundation

/// The lease row: which store instance's ticker advances the active timeline.
package struct Lease: Sendable, Hashable {
    package var holder: String?
    package var acquiredAtMs: Int64?
    package var expiresAtMs: Int64

    /// A value with every field given.
    package init(holder: String?, acquiredAtMs: Int64?, expiresAtMs: Int64) {
        self.holder = holder
        self.acquiredAtMs = acquiredAtMs
        self.expiresAtMs = expiresAtMs
    }
}

/// The earliest deadline of a running countdown on each timeline: what tells a transaction, at
/// no extra query, whether any countdown has come due.
package struct SoonestDeadlines: Sendable, Hashable {
    package var wall: Int64?
    package var active: Int64?

    /// The earliest deadline on `policy`'s timeline.
    package subscript(policy: CountdownPolicy) -> Int64? {
        policy == .wall ? wall : active
    }

    /// Whether a running countdown has reached its deadline at `time`.
    package func anyDue(at time: some ClockInstant) -> Bool {
        due(at: time) != SoonestDeadlines()
    }

    /// The deadlines that have been reached at `time`; nil for a timeline whose soonest has not.
    package func due(at time: some ClockInstant) -> SoonestDeadlines {
        func reached(_ policy: CountdownPolicy) -> Int64? {
            self[policy].flatMap { $0 <= time.timeline(policy) ? $0 : nil }
        }
        return SoonestDeadlines(wall: reached(.wall), active: reached(.active))
    }

    /// A value with every field given.
    package init(wall: Int64? = nil, active: Int64? = nil) {
        self.wall = wall
        self.active = active
    }
}

/// A position in the soonest-first order of one source of active items: `(sort value, key)`.
package struct SortPosition: Sendable, Hashable, Codable {
    package var value: Int64
    package var key: String
}

/// How many items are in one state and group.
package struct CountRow: Sendable, Hashable {
    package var state: CountdownState
    package var group: String?
    package var count: Int

    /// A value with every field given.
    package init(state: CountdownState, group: String?, count: Int) {
        self.state = state
        self.group = group
        self.count = count
    }
}

/// A range of events a reader of a named consumer has taken: its row in `countdown_consumer_claims`.
package struct ConsumerClaim: Sendable, Hashable {
    package var consumer: String
    package var firstID: Int64
    package var lastID: Int64
    /// Acknowledged up to this event id (`firstID - 1`: none yet).
    package var ackedThrough: Int64
    package var claimant: String
    /// The store wall clock at which another reader may take the claim over.
    package var claimedUntilMs: Int64

    /// Whether every event of the range is acknowledged.
    package var complete: Bool { ackedThrough >= lastID }

    /// A value with every field given.
    package init(consumer: String, firstID: Int64, lastID: Int64, ackedThrough: Int64, claimant: String, claimedUntilMs: Int64) {
        self.consumer = consumer
        self.firstID = firstID
        self.lastID = lastID
        self.ackedThrough = ackedThrough
        self.claimant = claimant
        self.claimedUntilMs = claimedUntilMs
    }
}

/// Reads inside one transaction. The store's logic is written against this protocol;
/// ``SQLiteRepository`` implements it on GRDB.
package protocol RepositoryReading {
    func checkpoint() throws -> Checkpoint?
    func lease() throws -> Lease
    /// The checkpoint, the lease and the soonest deadlines, in one query: what every transaction reads first.
    func clocks() throws -> (Checkpoint?, Lease, SoonestDeadlines)
    func item(key: String) throws -> ItemRecord?
    /// At most `limit` rows of `listing`, in its order (the lists themselves are in ``ItemListing``).
    func items(_ listing: ItemListing, limit: Int) throws -> [ItemRecord]
    /// Running countdowns of one policy whose deadline is at most `deadline`, counted per group.
    func dueCounts(policy: CountdownPolicy, dueBy deadline: Int64) throws -> [(group: String?, count: Int)]
    func counts() throws -> [CountRow]
    func events(afterID: Int64, limit: Int) throws -> [EventRecord]
    func lastEventID() throws -> Int64
    /// The last generation of `key` before it was removed, if it ever was.
    func retiredGeneration(key: String) throws -> Int64?
    /// The most recent events, newest first.
    func recentEvents(kinds: [String]?, limit: Int) throws -> [EventRecord]
    /// The items with these keys, whatever their state.
    func items(keys: [String]) throws -> [ItemRecord]
    /// The consumer's cursor; in a write transaction, its row stays locked until the end, so
    /// that readers of one consumer take their claims one after another.
    func consumerCursor(_ name: String) throws -> Int64?
    /// The claims of a consumer, by first event id.
    func consumerClaims(_ name: String) throws -> [ConsumerClaim]
    /// `local`, a reading of this host's clock taken for this transaction, as the store's time
    /// model must see it: SQLite keeps it as it is; an engine whose database has a clock of its
    /// own puts that clock in place of the system clock, read in the same round trip as ``clocks()``.
    func clockReading(_ local: ClockReading) throws -> ClockReading
    /// For an engine whose database has a clock of its own: how far that clock (plus the
    /// calibration offset) is ahead of the store wall clock `wall`, at the instant of the last
    /// ``clockReading(_:)``; `nil` for SQLite.
    func databaseClockSkew(wall: Int64) -> Int64?
    /// Runs `body`, whose reads of items take no row locks even in a write transaction (where
    /// engines that run writers side by side lock what they read): for reads that only decide
    /// what to show, taken after other locks, where a lock would risk a deadlock.
    func withoutRowLocks<T>(_ body: () throws -> T) rethrows -> T
}

extension RepositoryReading {
    package func clockReading(_ local: ClockReading) throws -> ClockReading { local }
    package func databaseClockSkew(wall: Int64) -> Int64? { nil }
    package func withoutRowLocks<T>(_ body: () throws -> T) rethrows -> T { try body() }
}

extension RepositoryWriting {
    package func lockClocks() throws {}

    package func insertNew(_ item: inout ItemRecord, lastWrite: Bool, thenAppend event: (ItemRecord) -> EventRecord) throws -> Bool {
        guard try insertNew(&item) else { return false }
        try append(event(item))
        return true
    }
}

/// Writes inside one transaction.
package protocol RepositoryWriting: RepositoryReading {
    /// Runs `body` in a savepoint: when it throws, what it wrote is rolled back and the rest of
    /// the transaction stays.
    func savepoint<T>(_ body: () throws -> T) throws -> T
    /// Locks the clock row until the transaction ends; called before the clocks are read by a
    /// write that moves the checkpoint or the lease, so that those writes take turns while the
    /// others run side by side. SQLite has one writer at a time already: nothing to do.
    func lockClocks() throws
    func save(_ checkpoint: Checkpoint, creating: Bool) throws
    /// Whether the store holds any countdown or event (see ``FirstClockRow``).
    func holdsItemsOrEvents() throws -> Bool
    func save(_ lease: Lease) throws
    /// Inserts `item` unless its key exists, continuing the generations of a removed key, and
    /// sets its `id` and `generation`; returns `false`, having changed nothing, when the key exists.
    func insertNew(_ item: inout ItemRecord) throws -> Bool
    /// ``insertNew(_:)``, then, if it inserted, appends `event` made from the item. `lastWrite`
    /// says that the transaction writes nothing after it, so an engine may send both in one
    /// statement (PostgreSQL does).
    func insertNew(_ item: inout ItemRecord, lastWrite: Bool, thenAppend event: (ItemRecord) -> EventRecord) throws -> Bool
    func update(_ item: ItemRecord) throws
    /// Deletes the item, remembering its generation so the key never reuses it.
    func delete(_ item: ItemRecord) throws
    func append(_ event: EventRecord) throws
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
    /// `events`: one statement for all where the engine can (PostgreSQL does).
    func recordExpiries(_ items: [ItemRecord], events: [EventRecord]) throws
    /// Running countdowns of one policy due by `deadline`, in deadline order, at most `limit`,
    /// to record their expiries: locked until the transaction ends where writers run side by
    /// side, skipping rows another writer has locked (it is recording them).
    func dueForExpiry(policy: CountdownPolicy, dueBy deadline: Int64, limit: Int) throws -> [ItemRecord]
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
    /// Named consumers with their cursors and the instant each last moved.
    func consumers() throws -> [(name: String, cursor: Int64, updatedAtMs: Int64)]
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

/// Where the store keeps its rows: transactions over a database.
package protocol CountdownRepository: Sendable {
    func read<T: Sendable>(_ body: @escaping @Sendable (any RepositoryReading) throws -> T) async throws -> T
    func write<T: Sendable>(_ body: @escaping @Sendable (any RepositoryWriting) throws -> T) async throws -> T
    /// ``read(_:)`` for a body that reads events by ID (a reader's next events, the last ID).
    func readEvents<T: Sendable>(_ body: @escaping @Sendable (any RepositoryReading) throws -> T) async throws -> T
}

extension CountdownRepository {
    /// ``read(_:)`` for a body that reads events by ID (a reader's next events, the last ID): an
    /// engine whose writers commit events out of order readies what those reads need first.
    package func readEvents<T: Sendable>(_ body: @escaping @Sendable (any RepositoryReading) throws -> T) async throws -> T {
        try await read(body)
    }
}

/// Work an engine does in the background while a ticker runs (SQLite: folding the write-ahead
/// log back into the file when no deadline is near).
package protocol EngineUpkeep: AnyObject, Sendable {
    /// The ticker is about to sleep, and the next deadline is `gapMs` away (`nil`: none is due).
    func idle(untilNextDeadlineMs gapMs: Int64?)
    /// Stops, waiting for work under way.
    func stop() async
}

/// What the store needs of its database engine besides transactions: the signs of other
/// connections' writes, upkeep while a ticker runs, inspection, and closing. The store's logic
/// reaches the database through this protocol and ``CountdownRepository`` alone.
package protocol StorageEngine: CountdownRepository {
    /// A number that changes whenever another connection (another process) commits; the ticker
    /// polls it to notice writes it was not told about.
    func foreignChangeToken() async throws -> Int
    /// Whether the database tells this engine of other connections' writes as they commit
    /// (PostgreSQL's LISTEN/NOTIFY), so that ``watchForeignChanges(clock:_:)`` is worth running.
    var pushesForeignChanges: Bool { get }
    /// Calls `changed` whenever another connection's commit may matter (and whenever the engine
    /// may have missed one), until the task is cancelled; the ticker runs it beside its loop.
    func watchForeignChanges(clock: any StoreClock, _ changed: @escaping @Sendable () -> Void) async
    /// Starts the engine's upkeep for a ticker that starts running; `nil` when the engine has
    /// none (or the database is the host's to look after).
    func startUpkeep() throws -> (any EngineUpkeep)?
    /// The migrations the database records, in the order they were applied.
    func appliedMigrations() async throws -> [String]
    /// The migrations this build knows, in order.
    var knownMigrations: [String] { get }
    /// The engine's own integrity check: `["ok"]` when the database is sound.
    func integrityCheck() async throws -> [String]
    /// Folds the write-ahead log into the database and truncates it; whether all of it was.
    func checkpointLog() async throws -> Bool
    /// Closes what the store opened itself, after folding its log in; leaves a host's database open.
    func close() throws
    /// Makes the waits of the operations still under way give up now (they fail), for a store
    /// that closes without waiting any longer for a database that does not answer; ``close()``
    /// follows once they have ended. Engines whose every wait is bounded do nothing.
    func abandonWaits()
    /// What the engine adds to ``StoreDiagnostics`` (`clock`: this host's clock, to compare).
    func details(clock: any StoreClock) async throws -> [EngineDetail]
    /// Whether only the writes that must move the checkpoint do (the holder's heartbeats, clock
    /// edits, suspending, calibrating), taking the clock row's lock first, while every other
    /// write leaves the clock row alone and never queues on it: engines shared by hosts on
    /// several machines, whose writers run side by side. Otherwise every write moves it.
    var writersRunSideBySide: Bool { get }
    /// `local` as the time model must see it outside a transaction: the engine's estimate of its
    /// database's clock now (see ``RepositoryReading/clockReading(_:)``).
    func clockReading(_ local: ClockReading) -> ClockReading
    /// Leaves the database to other processes' writers for `pause` (real time): this store's own
    /// writes wait meanwhile. Between the batches of a backlog.
    func leaveWritesToOthers(for pause: Duration) async
}

extension StorageEngine {
    package func leaveWritesToOthers(for pause: Duration) async {
        try? await Task.sleep(for: pause)
    }
    package var pushesForeignChanges: Bool { false }
    package func watchForeignChanges(clock: any StoreClock, _ changed: @escaping @Sendable () -> Void) async {}
    package func details(clock: any StoreClock) async throws -> [EngineDetail] { [] }
    package var writersRunSideBySide: Bool { false }
    package func clockReading(_ local: ClockReading) -> ClockReading { local }
    package func abandonWaits() {}
}
