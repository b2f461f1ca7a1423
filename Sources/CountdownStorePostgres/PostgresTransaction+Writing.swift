import CountdownStoreCore
import CountdownStoreSQL
import Foundation
import Logging
import PostgresNIO

// The writes of a PostgreSQL transaction (`RepositoryWriting`).
extension PostgresTransaction {
    func savepoint<T>(_ body: () throws -> T) throws -> T {
        savepoints += 1
        let name = "countdown_\(savepoints)"
        // Sent unanswered: the body's first statement takes its answer, so a savepoint costs no
        // round trip of its own (a group commit puts each of its writes in one).
        try sendUnanswered("SAVEPOINT \(name)")
        // Events the body appends are not inserted yet: rolling back drops them here. Those
        // appended before it and inserted inside it (before an operation of the schema's own,
        // whose events come after them) are queued again.
        let (pendingBefore, flushesBefore) = (pendingEvents, eventFlushes)
        let (wakeUpBefore, soonestBefore) = (wakeUp, soonestRead)
        do {
            let value = try body()
            try sendUnanswered("RELEASE SAVEPOINT \(name)")
            return value
        } catch {
            // What was sent unanswered answers first (a failure among it fails the transaction
            // anyway: the rollback below then fails too, and the commit rolls back).
            try? takeUnanswered()
            try? execute("ROLLBACK TO SAVEPOINT \(name)")
            if eventFlushes != flushesBefore {
                pendingEvents = pendingBefore
            } else if pendingEvents.count > pendingBefore.count {
                pendingEvents.removeSubrange(pendingBefore.count...)
            }
            (wakeUp, soonestRead) = (wakeUpBefore, soonestBefore)
            throw error
        }
    }

    func lockClocks() throws {
        try run("SELECT 1 FROM \(schemaPrefix)countdown_clock WHERE id = 1 FOR UPDATE")
    }

    func save(_ checkpoint: Checkpoint, creating: Bool) throws {
        let values: [SQLValue] = [
            .int(checkpoint.createdAt), .int(checkpoint.active), .int(checkpoint.gap), .int(checkpoint.heartbeatAt),
            .int(checkpoint.heartbeatBoot), .text(checkpoint.bootID), .int(checkpoint.wallFloor),
            .bool(checkpoint.suspended),
            .int(checkpoint.calibrationOffset), .int(checkpoint.calibratedAt), .int(checkpoint.clockSkew),
        ]
        let sql =
            creating
            ? """
            INSERT INTO \(schemaPrefix)countdown_clock (created_at_ms, active_ms, gap_ms, heartbeat_at_ms,
                heartbeat_boot_ms, boot_id, wall_floor_ms, suspended, calibration_offset_ms, calibrated_at_ms,
                clock_skew_ms, id)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 1) ON CONFLICT (id) DO NOTHING
            """
            : """
            UPDATE \(schemaPrefix)countdown_clock SET created_at_ms = $1, active_ms = $2, gap_ms = $3,
                heartbeat_at_ms = $4, heartbeat_boot_ms = $5, boot_id = $6, wall_floor_ms = $7, suspended = $8,
                calibration_offset_ms = $9, calibrated_at_ms = $10, clock_skew_ms = $11
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
    func noteDeadline(_ item: ItemRecord) {
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
            var values: [SQLValue] = []
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
            var values: [SQLValue] = []
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
                    "($\(first + 1)::bigint, $\(first + 2)::bigint, $\(first + 3)::bigint, $\(first + 4)::bigint, "
                        + "$\(first + 5)::bigint)"
                )
            }
            try run(
                """
                UPDATE \(schemaPrefix)countdowns AS c SET state = 'expired', paused_at_ms = NULL, deadline_ms = NULL,
                    final_elapsed_ms = v.final_elapsed_ms, ended_at_ms = v.ended_at_ms, expired_at_ms = v.expired_at_ms,
                    updated_at_ms = v.updated_at_ms
                FROM (VALUES \(rows.joined(separator: ", ")))
                    AS v(id, final_elapsed_ms, ended_at_ms, expired_at_ms, updated_at_ms)
                WHERE c.id = v.id
                """, values)
        }
        for event in events { try append(event) }
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
    func flushEvents(leavingLastUnanswered: Bool) throws {
        if !pendingEvents.isEmpty { eventFlushes += 1 }
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
    func insertEvents(_ events: ArraySlice<EventRecord>) -> (String, [SQLValue]) {
        var values: [SQLValue] = [.int(Int64(engine.eventLockClass))]
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
}
