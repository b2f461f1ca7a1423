import CountdownStoreCore
import CountdownStoreSQL
import Foundation
import Logging
import PostgresNIO

// The reads of a PostgreSQL transaction (`RepositoryReading`).
extension PostgresTransaction {
    func holdsItemsOrEvents() throws -> Bool {
        try run(
            "SELECT EXISTS (SELECT 1 FROM \(schemaPrefix)countdowns) "
                + "OR EXISTS (SELECT 1 FROM \(schemaPrefix)countdown_events)"
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
        lastEventAtMs = try r.optionalInt(17)
        soonestRead = SoonestDeadlines(wall: try r.optionalInt(14), active: try r.optionalInt(15))
        let lease = try Lease(row: r, from: 11)
        leaseRead = lease
        return (checkpoint, lease, soonestRead)
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
            bootScope: engine.bootScope, stepTolerance: engine.clockStepToleranceMs,
            floor: floorWhileNobodyCounts(server))
    }

    /// The instant of the last write, as the server's clock read it (less the calibration
    /// offset), when no host holds a live lease: the floor below which a reading comes from a
    /// server clock stepped back while nobody counted (writers leave the checkpoint behind, so
    /// the checkpoint does not know of their writes). `nil` while a holder counts, whose
    /// checkpoints carry the clock's steps: the floor never acts in normal running.
    private func floorWhileNobodyCounts(_ server: Int64) -> Int64? {
        guard let lastEventAtMs, let checkpointRead else { return nil }
        let offset = checkpointRead.calibrationOffset
        if let lease = leaseRead, lease.holder != nil, lease.expiresAtMs > server + offset { return nil }
        return lastEventAtMs - offset
    }

    /// The server's clock as the last ``clockReading(_:)`` placed it: what claims are timed on.
    var databaseClockMs: Int64? { engine.databaseClock ? serverAtReading : nil }

    /// In a write transaction, what the store reads of items it may change stays locked until
    /// the end: two writers changing one countdown take turns, and the second sees the first's
    /// change (a countdown expired by one is not expired again by the other).
    var forUpdate: String { writing && lockingRows ? " FOR UPDATE" : "" }

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

    /// The list in the core's predicates and order, numbered in PostgreSQL's placeholders.
    func items(_ wanted: ItemListing, limit: Int) throws -> [ItemRecord] {
        let listing = SQLItemListing(wanted)
        let (conditions, listed) = listing.whereClause { "$\($0)" }
        var values = listed
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
            WHERE state = 'running' AND deadline_ms IS NOT NULL AND policy = $1 AND deadline_ms <= $2
            GROUP BY group_name
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

    /// Reads the last event ID numbered, then the floors of the writers under way, and gives the horizon.
    func computeEventHorizon() throws -> Int64 {
        // Two statements, in this order, sent together.
        let lastSent = try send(engine.statements.lastNumberedEvent, [])
        let floorsSent = try send(
            engine.statements.eventWriterFloors, [.int(Int64(UInt32(bitPattern: engine.eventLockClass)))])
        try takeUnanswered()
        let last =
            try Array(TransactionThread.wait(for: lastSent, on: connection, watch: watch).rows).first?.decode(
                Int64.self) ?? 0
        var horizon = last
        for row in try Array(TransactionThread.wait(for: floorsSent, on: connection, watch: watch).rows) {
            // The floor is `last` or below it, less than 2³⁰ apart; a floor a little above
            // `last` (a writer that began after it was read) bounds nothing.
            let behind =
                ((last - (try row.decode(Int64.self))) % Self.floorModulus + Self.floorModulus) % Self.floorModulus
            if behind < Self.floorModulus / 2 { horizon = min(horizon, last - behind) }
        }
        return horizon
    }
}
