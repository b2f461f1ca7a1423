import CountdownStoreCore
import CountdownStoreSQL
import Foundation
import Logging
import PostgresNIO

/// One transaction's view of the tables on PostgreSQL: the same reads and writes as SQLite's,
/// each statement waited for on the engine's thread.
final class PostgresTransaction: RepositoryWriting, @unchecked Sendable {
    let engine: PostgresEngine
    let connection: PostgresConnection
    let writing: Bool
    /// When its statements stop being waited for.
    let watch: StatementWatch
    /// The server's clock and the checkpoint, as the last ``clocks()`` read them.
    private var serverMs: Int64?
    /// This host's boot clock right before the last ``clocks()`` statement was sent.
    private var bootBeforeClocks: Int64?
    /// The server's clock at the instant of the last ``clockReading(_:)`` (uncorrected).
    private var serverAtReading: Int64?
    private var checkpointRead: Checkpoint?
    /// The soonest deadlines as the last ``clocks()`` read them.
    private var soonestRead = SoonestDeadlines()
    private var savepoints = 0
    /// What this write tells the other hosts when it commits (a NOTIFY payload), if anything:
    /// `deadline` when it moved a next deadline earlier, `expired` when it recorded an expiry.
    private(set) var wakeUp: String?
    /// Events appended and not inserted yet: they go in together at the end (see ``flushEvents()``).
    private var pendingEvents: [EventRecord] = []
    /// Statements sent and not waited for (the BEGIN, a savepoint's SAVEPOINT and RELEASE, the
    /// last insert before the COMMIT): the connection runs them in order before the next one,
    /// whose wait takes their results first. No thread wakes up between them.
    private var unanswered: [(result: EventLoopFuture<PostgresQueryResult>, isBegin: Bool)] = []

    init(engine: PostgresEngine, connection: PostgresConnection, writing: Bool, watch: StatementWatch) {
        self.engine = engine
        self.connection = connection
        self.writing = writing
        self.watch = watch
    }

    private var schemaPrefix: String { engine.prefix }

    // MARK: Statements

    /// Runs `sql` binding `values`, and returns its rows and how many rows it changed.
    @discardableResult
    func run(_ sql: String, _ values: [Value] = []) throws -> (rows: [PostgresRow], changed: Int) {
        let future = try send(sql, values)
        try takeUnanswered()
        let result = try Blocking.wait(for: future, on: connection, watch: watch)
        return (Array(result.rows), result.metadata.rows ?? 0)
    }

    /// Sends `sql` without waiting for its result: the next statement's wait (or
    /// ``takeUnanswered()``) takes it, and throws its failure.
    func sendUnanswered(_ sql: String, _ values: [Value] = [], isBegin: Bool = false) throws {
        unanswered.append((try send(sql, values), isBegin))
    }

    /// Waits for the statements sent unanswered, in order; a failed BEGIN throws ``BeginFailed``.
    /// The first failure is thrown once every one of them has answered.
    func takeUnanswered() throws {
        guard !unanswered.isEmpty else { return }
        let sent = unanswered
        unanswered.removeAll()
        var failure: (any Error)?
        for (future, isBegin) in sent {
            do {
                _ = try Blocking.wait(for: future, on: connection, watch: watch)
            } catch let error as WaitAbandoned {
                throw error
            } catch {
                if failure == nil {
                    failure = isBegin ? BeginFailed(failure: PostgresFailure(error, place: engine.place)) : error
                }
            }
        }
        if let failure { throw failure }
    }

    private func send(_ sql: String, _ values: [Value]) throws -> EventLoopFuture<PostgresQueryResult> {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values {
            switch value {
            case .int(let number): bindings.append(number)
            case .text(let text): bindings.append(text)
            case .bytes(let data): try bindings.append(data)
            case .bool(let flag): bindings.append(flag)
            case .null: bindings.appendNull()
            }
        }
        return connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: engine.logger)
    }

    func execute(_ sql: String) throws {
        try run(sql)
    }

    /// A value a statement binds.
    enum Value {
        case int(Int64)
        case text(String)
        case bytes(Data)
        case bool(Bool)
        case null

        static func int(_ value: Int64?) -> Value { value.map { .int($0) } ?? .null }
        static func text(_ value: String?) -> Value { value.map { .text($0) } ?? .null }
    }

    // MARK: Decoding

    /// The columns an insert writes (the database numbers new rows), in ``itemValues(_:)``'s order.
    static let insertColumns = """
        key, group_name, kind, policy, state, duration_ms, generation, start_offset_ms, gap_at_start_ms, \
        started_at_ms, paused_ms, paused_at_ms, deadline_ms, final_elapsed_ms, ended_at_ms, expired_at_ms, \
        payload, payload_bytes, updated_at_ms
        """
    /// The types of the columns an insert writes, in order.
    static let insertTypes =
        ["text", "text", "text", "text", "text"] + Array(repeating: "bigint", count: 11) + ["text", "bytea", "bigint"]

    /// The core's columns (``ItemRecord/selectedColumns``), then the bytes of a binary payload.
    private var selectItems: String {
        "SELECT \(ItemRecord.selectedColumns), payload_bytes FROM \(schemaPrefix)countdowns"
    }

    private static func item(_ row: PostgresRow) throws -> ItemRecord {
        try ItemRecord(row: PostgresRecordRow(row, payloadBytesColumn: 19))
    }

    private static func payloadValues(_ payload: CountdownPayload?) -> [Value] {
        switch payload {
        case .text(let text)?: [.text(text), .null]
        case .bytes(let data)?: [.null, .bytes(data)]
        case nil: [.null, .null]
        }
    }

    private static func itemValues(_ item: ItemRecord) -> [Value] {
        [
            .int(item.id), .text(item.key), .text(item.group), .text(item.kind.rawValue), .text(item.policy.rawValue),
            .text(item.state.rawValue), .int(item.durationMs), .int(item.generation), .int(item.startOffsetMs),
            .int(item.gapAtStartMs), .int(item.startedAtMs), .int(item.pausedMs), .int(item.pausedAtMs),
            .int(item.deadlineMs), .int(item.finalElapsedMs), .int(item.endedAtMs), .int(item.expiredAtMs),
        ] + payloadValues(item.payload) + [.int(item.updatedAtMs)]
    }

    /// The core's columns (``EventRecord/selectedColumns``), then the bytes of a binary payload.
    private var selectEvents: String {
        "SELECT \(EventRecord.selectedColumns), payload_bytes FROM \(schemaPrefix)countdown_events"
    }

    private static func event(_ row: PostgresRow) throws -> EventRecord {
        try EventRecord(row: PostgresRecordRow(row, payloadBytesColumn: 11))
    }

    // MARK: Reading

    func holdsItemsOrEvents() throws -> Bool {
        try run(
            "SELECT EXISTS (SELECT 1 FROM \(schemaPrefix)countdowns) OR EXISTS (SELECT 1 FROM \(schemaPrefix)countdown_events)"
        )
        .rows.first?.decode(Bool.self) ?? false
    }

    func checkpoint() throws -> Checkpoint? {
        try run("SELECT \(Checkpoint.selectedColumns) FROM \(schemaPrefix)countdown_clock WHERE id = 1").rows.first.map
        {
            try Checkpoint(row: PostgresRecordRow($0))
        }
    }

    func lease() throws -> Lease {
        try run("SELECT \(Lease.selectedColumns) FROM \(schemaPrefix)countdown_lease WHERE id = 1").rows.first.map {
            try Lease(row: PostgresRecordRow($0))
        } ?? Lease(holder: nil, acquiredAtMs: nil, expiresAtMs: 0)
    }

    func clocks() throws -> (Checkpoint?, Lease, SoonestDeadlines) {
        // The server's clock comes in the same round trip. Writers do not lock the row here: the
        // few that move the checkpoint lock it first (``lockClocks()``), so this statement's
        // snapshot already shows what the writer before them saved.
        bootBeforeClocks = engine.clock.bootMilliseconds
        guard let row = try run(engine.statements.clocks).rows.first else {
            return (nil, try lease(), SoonestDeadlines())
        }
        let r = PostgresRecordRow(row)
        let checkpoint = try Checkpoint(row: r)
        checkpointRead = checkpoint
        serverMs = try r.int(16)
        soonestRead = SoonestDeadlines(wall: try r.optionalInt(14), active: try r.optionalInt(15))
        return (checkpoint, try Lease(row: r, from: 11), soonestRead)
    }

    /// The server's clock in place of the host's system clock: this reads it, in the clock
    /// query's round trip, and ``ServerClockEstimate`` places it (see there).
    func clockReading(_ local: ClockReading) throws -> ClockReading {
        var server: Int64
        var uncertainty: Int64 = 0
        var boot = local.boot
        if !engine.databaseClock {
            server = local.system
        } else if let serverMs, let bootBeforeClocks {
            // The server read its clock somewhere between the statement's sending and its result
            // (`local` was read right after): take the middle, and carry it to `local`'s instant.
            uncertainty = max(0, local.boot - bootBeforeClocks) / 2 + 1
            server = serverMs + max(0, local.boot - bootBeforeClocks) / 2
        } else {
            // No clock query before this one (a new store's first checkpoint): `local` may be
            // older than this statement by a migration's time, so the boot clock is read here,
            // around it, and the reading placed at its end.
            let before = engine.clock.bootMilliseconds
            let serverNow = try run("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint").rows.first?
                .decode(Int64.self)
            boot = engine.clock.bootMilliseconds
            uncertainty = max(0, boot - before) / 2 + 1
            server = (serverNow ?? local.system) + max(0, boot - before) / 2
        }
        if engine.databaseClock {
            (server, uncertainty) = engine.serverClock.filtered(server: server, boot: boot, uncertainty: uncertainty)
        }
        serverAtReading = server
        return engine.serverClock.reading(
            server: server, boot: boot, uncertainty: uncertainty, checkpoint: checkpointRead,
            bootScope: engine.bootScope,
            stepTolerance: engine.clockStepToleranceMs)
    }

    /// In a write transaction, what the store reads of items it may change stays locked until
    /// the end: two writers changing one countdown take turns, and the second sees the first's
    /// change (a countdown expired by one is not expired again by the other).
    private var forUpdate: String { writing && lockingRows ? " FOR UPDATE" : "" }
    /// Off inside ``withoutRowLocks(_:)``.
    private var lockingRows = true

    func withoutRowLocks<T>(_ body: () throws -> T) rethrows -> T {
        let was = lockingRows
        lockingRows = false
        defer { lockingRows = was }
        return try body()
    }

    /// How far the server's clock (with the calibration offset) is ahead of the store wall clock
    /// `wall` at the last ``clockReading(_:)``: the skew a checkpoint at that reading records, so
    /// that hosts reading the server's clock less it agree with the holder counting on its boot clock.
    func databaseClockSkew(wall: Int64) -> Int64? {
        guard engine.databaseClock, let serverAtReading else { return nil }
        return ServerClockEstimate.skew(
            server: serverAtReading, calibrationOffset: checkpointRead?.calibrationOffset ?? 0, wall: wall)
    }

    func item(key: String) throws -> ItemRecord? {
        try run(selectItems + " WHERE key = $1" + forUpdate, [.text(key)]).rows.first.map(Self.item)
    }

    /// The list in the core's predicates and order, numbered in PostgreSQL's placeholders.
    func items(_ wanted: ItemListing, limit: Int) throws -> [ItemRecord] {
        let listing = SQLItemListing(wanted)
        let (conditions, listed) = listing.whereClause { "$\($0)" }
        var values: [Value] = listed.map { value in
            switch value {
            case .int(let number): .int(number)
            case .text(let text): .text(text)
            }
        }
        values.append(.int(Int64(limit)))
        let sql =
            selectItems + " WHERE " + conditions + (listing.order.map { " ORDER BY " + $0 } ?? "")
            + " LIMIT $\(values.count)" + forUpdate
        return try run(sql, values).rows.map(Self.item)
    }

    func dueCounts(policy: CountdownPolicy, dueBy deadline: Int64) throws -> [(group: String?, count: Int)] {
        try run(
            """
            SELECT group_name, count(*) FROM \(schemaPrefix)countdowns
            WHERE state = 'running' AND deadline_ms IS NOT NULL AND policy = $1 AND deadline_ms <= $2 GROUP BY group_name
            """, [.text(policy.rawValue), .int(deadline)]
        ).rows.map { row in
            let r = row.makeRandomAccess()
            return (try r[0].decode(String?.self), Int(try r[1].decode(Int64.self)))
        }
    }

    func counts() throws -> [CountRow] {
        try run("SELECT state, group_name, count(*) FROM \(schemaPrefix)countdowns GROUP BY state, group_name").rows
            .compactMap { row in
                let r = row.makeRandomAccess()
                guard let state = CountdownState(rawValue: try r[0].decode(String.self)) else { return nil }
                return CountRow(
                    state: state, group: try r[1].decode(String?.self), count: Int(try r[2].decode(Int64.self)))
            }
    }

    func events(afterID: Int64, limit: Int) throws -> [EventRecord] {
        try flushEvents()
        let horizon = try eventHorizon()
        guard horizon > afterID else { return [] }
        return try run(
            selectEvents + " WHERE id > $1 AND id <= $3 ORDER BY id LIMIT $2",
            [.int(afterID), .int(Int64(limit)), .int(horizon)]
        ).rows.map(Self.event)
    }

    func lastEventID() throws -> Int64 {
        try flushEvents()
        return try run(
            "SELECT coalesce(max(id), 0) FROM \(schemaPrefix)countdown_events WHERE id <= $1",
            [.int(try eventHorizon())]
        )
        .rows.first?.decode(Int64.self) ?? 0
    }

    // MARK: The event horizon

    /// The modulus of a writer's floor in its lock's second key (a lock key is 32 bits).
    static let floorModulus: Int64 = 1 << 31

    /// The highest event ID up to which every event is either committed or never will be: the
    /// last ID numbered, or, below it, the floor of the first writer of events still under way
    /// (see ``flushEvents()``). Reads of events by ID go no further.
    ///
    /// It holds for any snapshot taken after it is computed: a writer that numbered an ID up to
    /// the last one was holding its lock when that was read, so it either still holds it when
    /// the locks are read next (its floor, below all its IDs, bounds the horizon) or has ended,
    /// its commit visible to every later snapshot. A write transaction (READ COMMITTED) takes a
    /// snapshot per statement and computes it at its first read of events; a read transaction
    /// (one snapshot, taken at its first statement) has it computed before its BEGIN
    /// (``PostgresEngine/readEvents(_:)``).
    func eventHorizon() throws -> Int64 {
        if let horizon { return horizon }
        assert(writing, "a read transaction reads events by ID without the horizon computed before its snapshot")
        let horizon = try computeEventHorizon()
        self.horizon = horizon
        return horizon
    }

    /// The event horizon computed before this transaction's BEGIN (read transactions that read events).
    var horizon: Int64?

    /// Reads the last event ID numbered, then the floors of the writers under way, and gives the horizon.
    func computeEventHorizon() throws -> Int64 {
        // Two statements, in this order, sent together.
        let lastSent = try send(engine.statements.lastNumberedEvent, [])
        let floorsSent = try send(
            engine.statements.eventWriterFloors, [.int(Int64(UInt32(bitPattern: engine.eventLockClass)))])
        try takeUnanswered()
        let last =
            try Array(Blocking.wait(for: lastSent, on: connection, watch: watch).rows).first?.decode(Int64.self) ?? 0
        var horizon = last
        for row in try Array(Blocking.wait(for: floorsSent, on: connection, watch: watch).rows) {
            // The floor is `last` or below it, less than 2³⁰ apart; a floor a little above
            // `last` (a writer that began after it was read) bounds nothing.
            let behind =
                ((last - (try row.decode(Int64.self))) % Self.floorModulus + Self.floorModulus) % Self.floorModulus
            if behind < Self.floorModulus / 2 { horizon = min(horizon, last - behind) }
        }
        return horizon
    }

    func retiredGeneration(key: String) throws -> Int64? {
        try run("SELECT generation FROM \(schemaPrefix)countdown_retired_keys WHERE key = $1", [.text(key)]).rows.first?
            .decode(Int64.self)
    }

    func recentEvents(kinds: [String]?, limit: Int) throws -> [EventRecord] {
        try flushEvents()
        guard let kinds else {
            return try run(selectEvents + " ORDER BY id DESC LIMIT $1", [.int(Int64(limit))]).rows.map(Self.event)
        }
        let marks = kinds.indices.map { "$\($0 + 1)" }.joined(separator: ",")
        return try run(
            selectEvents + " WHERE kind IN (\(marks)) ORDER BY id DESC LIMIT $\(kinds.count + 1)",
            kinds.map { .text($0) } + [.int(Int64(limit))]
        ).rows.map(Self.event)
    }

    func recentEvents(key: String, window: Int, limit: Int) throws -> [EventRecord] {
        try flushEvents()
        return try run(
            "SELECT \(EventRecord.selectedColumns), payload_bytes FROM (SELECT * FROM \(schemaPrefix)countdown_events ORDER BY id DESC LIMIT $1) AS recent"
                + " WHERE key = $2 ORDER BY id DESC LIMIT $3",
            [.int(Int64(window)), .text(key), .int(Int64(limit))]
        ).rows.map(Self.event)
    }

    func items(keys: [String]) throws -> [ItemRecord] {
        // In key order, so that writers locking overlapping sets of keys take them in one order.
        let keys = writing ? keys.sorted() : keys
        var found: [ItemRecord] = []
        for start in stride(from: 0, to: keys.count, by: 500) {
            let chunk = keys[start..<min(start + 500, keys.count)]
            let marks = chunk.indices.map { "$\($0 - start + 1)" }.joined(separator: ",")
            let order = writing ? " ORDER BY key" : ""
            found += try run(selectItems + " WHERE key IN (\(marks))" + order + forUpdate, chunk.map { .text($0) }).rows
                .map(Self.item)
        }
        return found
    }

    func consumerCursor(_ name: String) throws -> Int64? {
        try run(
            "SELECT last_event_id FROM \(schemaPrefix)countdown_consumers WHERE name = $1"
                + (writing ? " FOR UPDATE" : ""),
            [.text(name)]
        ).rows.first?.decode(Int64.self)
    }

    func consumerClaims(_ name: String) throws -> [ConsumerClaim] {
        try run(
            """
            SELECT first_event_id, last_event_id, acked_through, claimant, claimed_until_ms
            FROM \(schemaPrefix)countdown_consumer_claims WHERE consumer = $1 ORDER BY first_event_id
            """, [.text(name)]
        ).rows.map { row in
            let (first, last, acked, claimant, until) = try row.decode((Int64, Int64, Int64, String, Int64).self)
            return ConsumerClaim(
                consumer: name, firstID: first, lastID: last, ackedThrough: acked, claimant: claimant,
                claimedUntilMs: until)
        }
    }

    // MARK: Writing

    func savepoint<T>(_ body: () throws -> T) throws -> T {
        savepoints += 1
        let name = "countdown_\(savepoints)"
        // Sent unanswered: the body's first statement takes its answer, so a savepoint costs no
        // round trip of its own (a group commit puts each of its writes in one).
        try sendUnanswered("SAVEPOINT \(name)")
        // Events the body appends are not inserted yet: rolling back drops them here.
        let (pending, wakeUpBefore, soonestBefore) = (pendingEvents.count, wakeUp, soonestRead)
        do {
            let value = try body()
            try sendUnanswered("RELEASE SAVEPOINT \(name)")
            return value
        } catch {
            // What was sent unanswered answers first (a failure among it fails the transaction
            // anyway: the rollback below then fails too, and the commit rolls back).
            try? takeUnanswered()
            try? execute("ROLLBACK TO SAVEPOINT \(name)")
            if pendingEvents.count > pending { pendingEvents.removeSubrange(pending...) }
            (wakeUp, soonestRead) = (wakeUpBefore, soonestBefore)
            throw error
        }
    }

    func lockClocks() throws {
        try run("SELECT 1 FROM \(schemaPrefix)countdown_clock WHERE id = 1 FOR UPDATE")
    }

    func save(_ checkpoint: Checkpoint, creating: Bool) throws {
        let values: [Value] = [
            .int(checkpoint.createdAt), .int(checkpoint.active), .int(checkpoint.gap), .int(checkpoint.heartbeatAt),
            .int(checkpoint.heartbeatBoot), .text(checkpoint.bootID), .int(checkpoint.wallFloor),
            .bool(checkpoint.suspended),
            .int(checkpoint.calibrationOffset), .int(checkpoint.calibratedAt), .int(checkpoint.clockSkew),
        ]
        let sql =
            creating
            ? """
            INSERT INTO \(schemaPrefix)countdown_clock (created_at_ms, active_ms, gap_ms, heartbeat_at_ms, heartbeat_boot_ms, boot_id,
                wall_floor_ms, suspended, calibration_offset_ms, calibrated_at_ms, clock_skew_ms, id)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 1) ON CONFLICT (id) DO NOTHING
            """
            : """
            UPDATE \(schemaPrefix)countdown_clock SET created_at_ms = $1, active_ms = $2, gap_ms = $3, heartbeat_at_ms = $4,
                heartbeat_boot_ms = $5, boot_id = $6, wall_floor_ms = $7, suspended = $8, calibration_offset_ms = $9,
                calibrated_at_ms = $10, clock_skew_ms = $11
            WHERE id = 1
            """
        try run(sql, values)
        checkpointRead = checkpoint
    }

    func save(_ lease: Lease) throws {
        // The term counts holders: it moves on whenever the lease passes to another instance.
        try run(
            """
            UPDATE \(schemaPrefix)countdown_lease SET
                term = CASE WHEN $1::text IS NOT NULL AND holder IS DISTINCT FROM $1::text THEN term + 1 ELSE term END,
                holder = $1, acquired_at_ms = $2, expires_at_ms = $3
            WHERE id = 1
            """, [.text(lease.holder), .int(lease.acquiredAtMs), .int(lease.expiresAtMs)])
    }

    /// Notes a running item whose deadline comes before the soonest one of its timeline: the
    /// lease holder, wherever it runs, must wake earlier than it planned.
    private func noteDeadline(_ item: ItemRecord) {
        guard item.state == .running, let deadline = item.deadlineMs else { return }
        if soonestRead[item.policy].map({ deadline < $0 }) ?? true {
            soonestRead = SoonestDeadlines(
                wall: item.policy == .wall ? deadline : soonestRead.wall,
                active: item.policy == .active ? deadline : soonestRead.active)
            wakeUp = wakeUp ?? "deadline"
        }
    }

    func insertNew(_ item: inout ItemRecord) throws -> Bool {
        noteDeadline(item)
        // One round trip: the generation continues a removed key's, looked up in the statement.
        let result = try run(engine.statements.insertNew, Array(Self.itemValues(item).dropFirst()))
        guard let row = result.rows.first else { return false }
        (item.id, item.generation) = try row.decode((Int64, Int64).self)
        return true
    }

    /// Every item in one statement (one round trip), in chunks of 256.
    func insertNew(all items: inout [ItemRecord]) throws -> [Bool] {
        var inserted = [Bool](repeating: false, count: items.count)
        for start in stride(from: 0, to: items.count, by: 256) {
            let chunk = start..<min(items.count, start + 256)
            var values: [Value] = []
            var positions: [String: Int] = [:]
            for index in chunk {
                noteDeadline(items[index])
                values += Self.itemValues(items[index]).dropFirst()
                positions[items[index].key] = index
            }
            for row in try run(engine.statements.insertNew(count: chunk.count), values).rows {
                let (id, generation, key) = try row.decode((Int64, Int64, String).self)
                guard let index = positions[key] else { continue }
                (items[index].id, items[index].generation) = (id, generation)
                inserted[index] = true
            }
        }
        return inserted
    }

    /// A new item and its event in one statement when nothing is written after them and no
    /// event waits before theirs: the event goes in under its writer's lock as
    /// ``flushEvents()`` inserts them, last, and takes the generation the insert gave the item.
    func insertNew(_ item: inout ItemRecord, lastWrite: Bool, thenAppend event: (ItemRecord) -> EventRecord) throws
        -> Bool
    {
        guard lastWrite, pendingEvents.isEmpty else {
            guard try insertNew(&item) else { return false }
            try append(event(item))
            return true
        }
        noteDeadline(item)
        let record = event(item)
        var values = Array(Self.itemValues(item).dropFirst())
        values.append(.int(Int64(engine.eventLockClass)))
        values += wakeUp.map { [.text(engine.channel), .text($0)] } ?? [.null, .null]
        values += [
            .text(record.kind), .text(record.key), .text(record.group), .int(record.atMs),
            .int(record.deadlineAtMs), .int(record.firedAtMs), .int(record.lateMs),
        ]
        values += Self.payloadValues(record.payload) + [.text(record.detail)]
        guard let row = try run(engine.statements.insertNewWithEvent, values).rows.first else {
            return false
        }
        (item.id, item.generation) = try row.decode((Int64, Int64).self)
        wakeUp = nil
        return true
    }

    func update(_ item: ItemRecord) throws {
        noteDeadline(item)
        try run(engine.statements.update, Self.itemValues(item))
    }

    /// The expired rows in one statement per 1,000 (one round trip, not one per row), then the
    /// events as every write appends them.
    func recordExpiries(_ items: [ItemRecord], events: [EventRecord]) throws {
        for start in stride(from: 0, to: items.count, by: 1_000) {
            let chunk = items[start..<min(start + 1_000, items.count)]
            var values: [Value] = []
            values.reserveCapacity(chunk.count * 5)
            var rows: [String] = []
            rows.reserveCapacity(chunk.count)
            for item in chunk {
                let first = values.count
                values += [
                    .int(item.id), .int(item.finalElapsedMs), .int(item.endedAtMs), .int(item.expiredAtMs),
                    .int(item.updatedAtMs),
                ]
                rows.append(
                    "($\(first + 1)::bigint, $\(first + 2)::bigint, $\(first + 3)::bigint, $\(first + 4)::bigint, $\(first + 5)::bigint)"
                )
            }
            try run(
                """
                UPDATE \(schemaPrefix)countdowns AS c SET state = 'expired', paused_at_ms = NULL, deadline_ms = NULL,
                    final_elapsed_ms = v.final_elapsed_ms, ended_at_ms = v.ended_at_ms, expired_at_ms = v.expired_at_ms,
                    updated_at_ms = v.updated_at_ms
                FROM (VALUES \(rows.joined(separator: ", "))) AS v(id, final_elapsed_ms, ended_at_ms, expired_at_ms, updated_at_ms)
                WHERE c.id = v.id
                """, values)
        }
        for event in events { try append(event) }
    }

    func delete(_ item: ItemRecord) throws {
        try run("DELETE FROM \(schemaPrefix)countdowns WHERE id = $1", [.int(item.id)])
        try run(
            """
            INSERT INTO \(schemaPrefix)countdown_retired_keys (key, generation, removed_at_ms) VALUES ($1, $2, $3)
            ON CONFLICT (key) DO UPDATE SET generation = greatest(countdown_retired_keys.generation, $2), removed_at_ms = $3
            """, [.text(item.key), .int(item.generation), .int(item.updatedAtMs)])
    }

    func append(_ event: EventRecord) throws {
        if event.kind == "expired" { wakeUp = "expired" }
        pendingEvents.append(event)
    }

    /// Inserts the events appended so far, and queues the wake-up notification if there is one.
    ///
    /// Event IDs are numbered as they are inserted, and a consumer reads past every ID it has
    /// seen, so a reader must never see a higher ID before a lower one that commits later.
    /// Writers do not take turns for that (they would commit one at a time): before it numbers
    /// its first event, a writer takes a shared advisory lock whose second key is the last ID
    /// numbered so far (its floor: every ID it takes is above it), and holds it until it commits
    /// or rolls back; readers read no further than the lowest floor of the writers under way
    /// (see ``eventHorizon()``). The lock is transaction-scoped (released at commit or rollback,
    /// which PgBouncer's transaction pooling keeps whole) and shared, so no writer waits for it.
    func flushEvents() throws {
        try flushEvents(leavingLastUnanswered: false)
    }

    /// ``flushEvents()``; with `leavingLastUnanswered`, the last insert is sent without waiting
    /// for it (the COMMIT follows it).
    private func flushEvents(leavingLastUnanswered: Bool) throws {
        while !pendingEvents.isEmpty {
            // A statement binds at most 65,535 values: 1,000 events at a time.
            let count = min(pendingEvents.count, 1_000)
            let (sql, values) = insertEvents(pendingEvents[..<count])
            if leavingLastUnanswered && count == pendingEvents.count {
                try sendUnanswered(sql, values)
            } else {
                try run(sql, values)
            }
            pendingEvents.removeFirst(count)
        }
    }

    /// The statement that inserts `events` under this writer's lock, and its values.
    private func insertEvents(_ events: ArraySlice<EventRecord>) -> (String, [Value]) {
        var values: [Value] = [.int(Int64(engine.eventLockClass))]
        let notifying = wakeUp != nil
        if let wakeUp {
            values += [.text(engine.channel), .text(wakeUp)]
            self.wakeUp = nil
        }
        values.reserveCapacity(values.count + events.count * PostgresStatements.eventTypes.count)
        for (index, event) in events.enumerated() {
            values += [
                .text(event.kind), .text(event.key), .text(event.group), .int(event.generation), .int(event.atMs),
                .int(event.deadlineAtMs), .int(event.firedAtMs), .int(event.lateMs),
            ]
            values += Self.payloadValues(event.payload)
            values += [.text(event.detail), .int(Int64(index))]
        }
        return (engine.statements.insertEvents(count: events.count, notifying: notifying), values)
    }

    /// What ends a write transaction before its COMMIT: the events not inserted yet, and the
    /// wake-up notification if the events did not carry it. The last statement is sent without
    /// waiting: the COMMIT's wait takes its result first (and, if it failed, the server has
    /// turned the COMMIT into a ROLLBACK).
    func finish() throws {
        try flushEvents(leavingLastUnanswered: true)
        if let wakeUp {
            // Delivered at commit to every host listening, the lease holder among them.
            try sendUnanswered("SELECT pg_notify($1, $2)", [.text(engine.channel), .text(wakeUp)])
        }
    }

    func createConsumer(_ name: String, cursor: Int64, at wallMs: Int64) throws {
        // Hosts of a fleet open one consumer side by side: the first creates it, the others keep it.
        try run(
            "INSERT INTO \(schemaPrefix)countdown_consumers (name, last_event_id, updated_at_ms) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING",
            [.text(name), .int(cursor), .int(wallMs)])
    }

    func advanceConsumer(_ name: String, to id: Int64, at wallMs: Int64) throws {
        try run(
            """
            INSERT INTO \(schemaPrefix)countdown_consumers (name, last_event_id, updated_at_ms) VALUES ($1, $2, $3)
            ON CONFLICT (name) DO UPDATE SET last_event_id = greatest(countdown_consumers.last_event_id, $2), updated_at_ms = $3
            """, [.text(name), .int(id), .int(wallMs)])
    }

    func save(_ claim: ConsumerClaim) throws {
        try run(
            """
            INSERT INTO \(schemaPrefix)countdown_consumer_claims
                (consumer, first_event_id, last_event_id, acked_through, claimant, claimed_until_ms)
            VALUES ($1, $2, $3, $4, $5, $6)
            ON CONFLICT (consumer, first_event_id) DO UPDATE SET last_event_id = $3, acked_through = $4,
                claimant = $5, claimed_until_ms = $6
            """,
            [
                .text(claim.consumer), .int(claim.firstID), .int(claim.lastID), .int(claim.ackedThrough),
                .text(claim.claimant), .int(claim.claimedUntilMs),
            ])
    }

    func deleteClaims(_ consumer: String, through id: Int64) throws {
        try run(
            "DELETE FROM \(schemaPrefix)countdown_consumer_claims WHERE consumer = $1 AND last_event_id <= $2",
            [.text(consumer), .int(id)])
    }

    func dueForExpiry(policy: CountdownPolicy, dueBy deadline: Int64, limit: Int) throws -> [ItemRecord] {
        // Rows another writer has locked are being recorded by it: hosts recording a mass
        // expiry side by side take batches of their own instead of queueing behind each other.
        let sql =
            selectItems + """
                 WHERE state = 'running' AND deadline_ms IS NOT NULL AND policy = $1 AND deadline_ms <= $2
                 ORDER BY deadline_ms, key LIMIT $3
                """ + (writing ? " FOR UPDATE SKIP LOCKED" : "")
        return try run(sql, [.text(policy.rawValue), .int(deadline), .int(Int64(limit))]).rows.map(Self.item)
    }

    func deleteItems(endedBefore cutoffMs: Int64, at nowMs: Int64, limit: Int) throws -> Int {
        // One batch, oldest first; rows another writer holds are left to the next batch.
        try run(
            """
            WITH doomed AS (
                DELETE FROM \(schemaPrefix)countdowns WHERE id IN (
                    SELECT id FROM \(schemaPrefix)countdowns WHERE state IN ('expired', 'cancelled') AND ended_at_ms < $1
                    ORDER BY ended_at_ms LIMIT $3 FOR UPDATE SKIP LOCKED)
                RETURNING key, generation)
            INSERT INTO \(schemaPrefix)countdown_retired_keys (key, generation, removed_at_ms)
            SELECT key, generation, $2 FROM doomed
            ON CONFLICT (key) DO UPDATE SET generation = greatest(countdown_retired_keys.generation, excluded.generation),
                removed_at_ms = excluded.removed_at_ms
            """, [.int(cutoffMs), .int(nowMs), .int(Int64(limit))]
        ).changed
    }

    func deleteEvents(before cutoffMs: Int64, throughID: Int64, limit: Int) throws -> (deleted: Int, more: Bool) {
        // Among the oldest `limit` events only (IDs follow W), so no pass scans the whole table.
        let rows = try run(
            "SELECT id, at_ms FROM \(schemaPrefix)countdown_events WHERE id <= $1 ORDER BY id LIMIT $2",
            [.int(throughID), .int(Int64(limit))]
        ).rows.map { try $0.decode((Int64, Int64).self) }
        let doomed = rows.prefix { $0.1 < cutoffMs }
        guard let first = doomed.first, let last = doomed.last else { return (0, false) }
        let deleted = try run(
            "DELETE FROM \(schemaPrefix)countdown_events WHERE id >= $1 AND id <= $2", [.int(first.0), .int(last.0)]
        ).changed
        return (deleted, doomed.count == limit)
    }

    func deleteRetiredKeys(removedBefore cutoffMs: Int64, limit: Int) throws -> Int {
        try run(
            """
            DELETE FROM \(schemaPrefix)countdown_retired_keys WHERE key IN (
                SELECT key FROM \(schemaPrefix)countdown_retired_keys
                WHERE removed_at_ms < least($1, coalesce((SELECT at_ms FROM \(schemaPrefix)countdown_events ORDER BY id LIMIT 1), $1))
                ORDER BY removed_at_ms LIMIT $2 FOR UPDATE SKIP LOCKED)
            """, [.int(cutoffMs), .int(Int64(limit))]
        ).changed
    }

    func consumers() throws -> [(name: String, cursor: Int64, updatedAtMs: Int64)] {
        try run("SELECT name, last_event_id, updated_at_ms FROM \(schemaPrefix)countdown_consumers ORDER BY name").rows
            .map { row in
                try row.decode((String, Int64, Int64).self)
            }
    }
}
