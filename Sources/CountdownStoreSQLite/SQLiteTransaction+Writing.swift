import CountdownStoreCore
import CountdownStoreSQL
import CSQLiteShim
import Foundation
import GRDB

// The writes of an SQLite transaction (`RepositoryWriting`) that are its own; those both engines
// share are written once, in `CountdownStoreSQL`.
extension SQLiteTransaction {
    func save(_ checkpoint: Checkpoint, creating: Bool) throws {
        let sql =
            creating
            ? """
            INSERT OR IGNORE INTO countdown_clock (created_at_ms, active_ms, gap_ms, heartbeat_at_ms,
                heartbeat_boot_ms, boot_id, wall_floor_ms, suspended, calibration_offset_ms, calibrated_at_ms,
                clock_skew_ms, id)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)
            """
            : """
            UPDATE countdown_clock SET created_at_ms = ?, active_ms = ?, gap_ms = ?, heartbeat_at_ms = ?,
                heartbeat_boot_ms = ?, boot_id = ?, wall_floor_ms = ?, suspended = ?, calibration_offset_ms = ?,
                calibrated_at_ms = ?, clock_skew_ms = ?
            WHERE id = 1
            """
        try db.run(sql) { values in
            values.add(checkpoint.createdAt)
            values.add(checkpoint.active)
            values.add(checkpoint.gap)
            values.add(checkpoint.heartbeatAt)
            values.add(checkpoint.heartbeatBoot)
            values.add(checkpoint.bootID)
            values.add(checkpoint.wallFloor)
            values.add(checkpoint.suspended)
            values.add(checkpoint.calibrationOffset)
            values.add(checkpoint.calibratedAt)
            values.add(checkpoint.clockSkew)
        }
    }

    func save(_ lease: Lease) throws {
        try db.run("UPDATE countdown_lease SET holder = ?, acquired_at_ms = ?, expires_at_ms = ? WHERE id = 1") {
            values in
            values.add(lease.holder)
            values.add(lease.acquiredAtMs)
            values.add(lease.expiresAtMs)
        }
    }

    func insertNew(_ item: inout ItemRecord) throws -> Bool {
        // Removed keys are rare: look one up only when this transaction found any at all.
        if memo.anyRetiredKeys == nil {
            memo.anyRetiredKeys = try db.first("SELECT EXISTS (SELECT 1 FROM countdown_retired_keys)") {
                try $0.bool(0)
            }
        }
        if memo.anyRetiredKeys == true, let retired = try retiredGeneration(key: item.key) {
            item.generation = max(item.generation, retired + 1)
        }
        try db.run(statement(&memo.insertNew, ItemRecord.insertNewSQL), bind: item.bind)
        guard db.changesCount == 1 else { return false }
        item.id = db.lastInsertedRowID
        return true
    }

    func update(_ item: ItemRecord) throws {
        try db.run(ItemRecord.updateSQL, bind: item.bind)
    }

    func recordExpiries(_ items: [ItemRecord], events: [EventRecord]) throws {
        // Each statement looked up once for the batch: the lookup hashes its whole text.
        let update = try db.cachedStatement(sql: ItemRecord.expireSQL)
        for item in items {
            try db.run(update) { values in
                values.add(item.id)
                values.add(item.finalElapsedMs)
                values.add(item.endedAtMs)
                values.add(item.expiredAtMs)
                values.add(item.updatedAtMs)
            }
        }
        try append(all: events)
    }

    func append(_ event: EventRecord) throws {
        try db.run(statement(&memo.appendEvent, EventRecord.insertSQL), bind: event.bind)
    }

    func append(all events: [EventRecord]) throws {
        var first = events.startIndex
        while first < events.endIndex {
            let rows = min(EventRecord.rowsPerInsert, events.endIndex - first)
            let statement =
                rows == EventRecord.rowsPerInsert
                ? try statement(&memo.appendEvents, EventRecord.insertSQL(rows: rows))
                : try db.cachedStatement(sql: EventRecord.insertSQL(rows: rows))
            try db.run(statement) { values in
                for event in events[first..<first + rows] { event.bind(&values) }
            }
            first += rows
        }
    }
}
