import CSQLiteShim
import Foundation

/// The raw SQLite side of the mass cases: the same rows through the C API, in transactions of a
/// fixed number of rows so that other processes' writes go between them.
extension Raw {
    /// Inserts `count` running wall countdowns `keyPrefix0` … into a file that has no other, all
    /// due at `timeline` on the wall timeline (deadline `timeline`, started at offset 0), in group
    /// `group`, with their start events: one statement each, untimed (setting up).
    static func insertDue(_ db: RawDatabase, keyPrefix: String, count: Int, group: String, timeline: Int64, nowMs: Int64) throws {
        try db.execute("BEGIN IMMEDIATE")
        let items = try db.prepare(
            """
            WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?1 - 1)
            INSERT INTO countdowns (key, group_name, kind, policy, state, duration_ms, generation, start_offset_ms,
                gap_at_start_ms, started_at_ms, paused_ms, paused_at_ms, deadline_ms, final_elapsed_ms, ended_at_ms,
                expired_at_ms, payload, updated_at_ms)
            SELECT ?2 || i, ?3, 'countdown', 'wall', 'running', ?4, 1, 0, 0, ?5, 0, NULL, ?4, NULL, NULL, NULL, NULL, ?5 FROM n
            """)
        try items.bind([.int(Int64(count)), .text(keyPrefix), .text(group), .int(timeline), .int(nowMs)]).run()
        let events = try db.prepare(
            """
            INSERT INTO countdown_events (kind, key, group_name, generation, at_ms, deadline_at_ms, fired_at_ms, late_ms,
                payload, detail)
            SELECT 'started', key, group_name, 1, ?1, NULL, NULL, NULL, NULL, '{"duration_ms":' || duration_ms || '}'
            FROM countdowns ORDER BY id
            """)
        try events.bind([.int(nowMs)]).run()
        try db.execute("COMMIT")
    }

    /// Expires due running wall countdowns, `batch` rows per transaction, as the store's
    /// expiry does: each row marked expired and its expiry event appended, oldest deadline first.
    final class DueExpiry {
        let due: RawStatement
        let update: RawStatement
        let event: RawStatement
        let begin: RawStatement
        let commit: RawStatement

        init(_ db: RawDatabase) throws {
            due = try db.prepare(
                "SELECT \(itemColumns) FROM countdowns INDEXED BY countdowns_running_by_deadline WHERE state = 'running' AND deadline_ms IS NOT NULL AND policy = 'wall' AND deadline_ms <= ?1 ORDER BY deadline_ms, key LIMIT ?2"
            )
            update = try db.prepare(
                "UPDATE countdowns SET state = 'expired', final_elapsed_ms = ?2, ended_at_ms = ?3, expired_at_ms = ?3, updated_at_ms = ?3 WHERE id = ?1"
            )
            event = try db.prepare(
                """
                INSERT INTO countdown_events (kind, key, group_name, generation, at_ms, deadline_at_ms, fired_at_ms,
                    late_ms, payload, detail)
                VALUES ('expired', ?1, ?2, ?3, ?4, ?5, ?4, ?6, ?7, NULL)
                """)
            begin = try db.prepare("BEGIN IMMEDIATE")
            commit = try db.prepare("COMMIT")
        }

        /// One transaction: at most `limit` countdowns due by `timeline` expired at `nowMs`; how many.
        func batch(timeline: Int64, nowMs: Int64, limit: Int) throws -> Int {
            try begin.bind([]).run()
            due.bind([.int(timeline), .int(Int64(limit))])
            var items: [Item] = []
            items.reserveCapacity(limit)
            while try due.step() { items.append(Item(due)) }
            for item in items {
                let deadline = item.deadlineMs ?? timeline
                try update.bind([.int(item.id), .int(item.durationMs ?? 0), .int(nowMs)]).run()
                try event.bind([
                    .text(item.key), item.group.map(RawValue.text) ?? .null, .int(item.generation), .int(nowMs),
                    .int(nowMs - (timeline - deadline)), .int(timeline - deadline), item.payload.map(RawValue.text) ?? .null,
                ]).run()
            }
            try commit.bind([]).run()
            return items.count
        }
    }

    /// Deletes ended countdowns and old events, `batch` rows per transaction: what pruning is
    /// without the store (no retired keys, no consumers' cursors, no `pruned` event).
    final class Prune {
        let expired: RawStatement
        let cancelled: RawStatement
        let events: RawStatement
        let begin: RawStatement
        let commit: RawStatement
        let db: RawDatabase

        init(_ db: RawDatabase) throws {
            self.db = db
            expired = try db.prepare(
                """
                DELETE FROM countdowns WHERE id IN (SELECT id FROM countdowns INDEXED BY countdowns_expired_by_time
                    WHERE state = 'expired' AND expired_at_ms < ?1 ORDER BY expired_at_ms, key LIMIT ?2)
                """)
            cancelled = try db.prepare(
                """
                DELETE FROM countdowns WHERE id IN (SELECT id FROM countdowns INDEXED BY countdowns_cancelled_by_time
                    WHERE state = 'cancelled' AND ended_at_ms < ?1 ORDER BY ended_at_ms, key LIMIT ?2)
                """)
            events = try db.prepare(
                "DELETE FROM countdown_events WHERE id IN (SELECT id FROM countdown_events WHERE at_ms < ?1 ORDER BY id LIMIT ?2)")
            begin = try db.prepare("BEGIN IMMEDIATE")
            commit = try db.prepare("COMMIT")
        }

        /// Deletes everything that ended (countdowns) or was recorded (events) before `cutoff`, `batch`
        /// rows per transaction; the countdowns and events deleted.
        func run(cutoff: Int64, batch: Int) throws -> (items: Int, events: Int) {
            var deleted = (items: 0, events: 0)
            for statement in [expired, cancelled, events] {
                while true {
                    try begin.bind([]).run()
                    try statement.bind([.int(cutoff), .int(Int64(batch))]).run()
                    let changes = Int(sqlite3_changes(db.handle))
                    try commit.bind([]).run()
                    if statement === events { deleted.events += changes } else { deleted.items += changes }
                    if changes < batch { break }
                }
            }
            return deleted
        }
    }
}
