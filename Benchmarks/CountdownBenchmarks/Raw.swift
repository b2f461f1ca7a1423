import Foundation

/// The raw SQLite side of every benchmark: the same rows, through the C API, with nothing else.
enum Raw {
    static let itemColumns = """
        id, key, group_name, kind, policy, state, duration_ms, generation, start_offset_ms, gap_at_start_ms,
        started_at_ms, paused_ms, paused_at_ms, deadline_ms, final_elapsed_ms, ended_at_ms, expired_at_ms,
        payload, updated_at_ms
        """

    static let insertItem = """
        INSERT INTO countdowns (key, group_name, kind, policy, state, duration_ms, generation, start_offset_ms,
            gap_at_start_ms, started_at_ms, paused_ms, paused_at_ms, deadline_ms, final_elapsed_ms, ended_at_ms,
            expired_at_ms, payload, updated_at_ms)
        VALUES (?1, ?2, 'countdown', 'wall', 'running', ?3, 1, 0, 0, ?4, 0, NULL, ?3, NULL, NULL, NULL, NULL, ?4)
        """

    static let insertStartEvent = """
        INSERT INTO countdown_events (kind, key, group_name, generation, at_ms, deadline_at_ms, fired_at_ms,
            late_ms, payload, detail)
        VALUES ('started', ?1, ?2, 1, ?3, NULL, NULL, NULL, NULL, ?4)
        """

    /// One item as read back: every column, decoded.
    struct Item {
        var id: Int64
        var key: String
        var group: String?
        var kind: String
        var policy: String
        var state: String
        var durationMs: Int64?
        var generation: Int64
        var startOffsetMs: Int64
        var gapAtStartMs: Int64
        var startedAtMs: Int64
        var pausedMs: Int64
        var pausedAtMs: Int64?
        var deadlineMs: Int64?
        var finalElapsedMs: Int64?
        var endedAtMs: Int64?
        var expiredAtMs: Int64?
        var payload: String?
        var updatedAtMs: Int64

        init(_ s: RawStatement) {
            func optional(_ column: Int32) -> Int64? { s.isNull(column) ? nil : s.int(column) }
            id = s.int(0)
            key = s.text(1) ?? ""
            group = s.text(2)
            kind = s.text(3) ?? ""
            policy = s.text(4) ?? ""
            state = s.text(5) ?? ""
            durationMs = optional(6)
            generation = s.int(7)
            startOffsetMs = s.int(8)
            gapAtStartMs = s.int(9)
            startedAtMs = s.int(10)
            pausedMs = s.int(11)
            pausedAtMs = optional(12)
            deadlineMs = optional(13)
            finalElapsedMs = optional(14)
            endedAtMs = optional(15)
            expiredAtMs = optional(16)
            payload = s.text(17)
            updatedAtMs = s.int(18)
        }

        /// Remaining time on the item's timeline at `timeline`: what a display shows.
        func remaining(at timeline: Int64) -> Int64 {
            guard let deadlineMs else { return .max }
            if state == "paused", let pausedAtMs { return deadlineMs - pausedAtMs }
            return max(0, deadlineMs - timeline)
        }
    }

    /// Inserts `count` countdowns and their start events in one transaction.
    static func bulkInsert(_ db: RawDatabase, prefix: String, count: Int, groups: Int, nowMs: Int64) throws {
        try batchedInserts(db, prefix: prefix, count: count, batch: count, groups: groups, nowMs: nowMs)
    }

    /// Inserts `count` countdowns in transactions of `batch` each.
    static func batchedInserts(_ db: RawDatabase, prefix: String, count: Int, batch: Int, groups: Int, nowMs: Int64) throws {
        let item = try db.prepare(insertItem)
        let event = try db.prepare(insertStartEvent)
        let begin = try db.prepare("BEGIN IMMEDIATE")
        let commit = try db.prepare("COMMIT")
        for first in stride(from: 0, to: count, by: max(1, batch)) {
            try begin.bind([]).run()
            for index in first..<min(count, first + max(1, batch)) {
                let key = "\(prefix)\(index)"
                let group = "g\(index % groups)"
                let duration = Int64(3_600_000 + index)
                try item.bind([.text(key), .text(group), .int(duration), .int(nowMs)]).run()
                try event.bind([.text(key), .text(group), .int(nowMs), .text("{\"duration_ms\":\(duration)}")]).run()
            }
            try commit.bind([]).run()
        }
    }

    /// Inserts `count` countdowns, one transaction each.
    static func singleInserts(_ db: RawDatabase, prefix: String, count: Int, groups: Int, nowMs: Int64) throws {
        try batchedInserts(db, prefix: prefix, count: count, batch: 1, groups: groups, nowMs: nowMs)
    }

    /// The running countdown of each policy with the earliest deadline, from the same index the
    /// store uses; the sooner of the two.
    final class NextDeadline {
        let statement: RawStatement
        init(_ db: RawDatabase) throws {
            statement = try db.prepare(
                "SELECT \(itemColumns) FROM countdowns INDEXED BY countdowns_running_by_deadline WHERE state = 'running' AND deadline_ms IS NOT NULL AND policy = ?1 ORDER BY deadline_ms LIMIT 1"
            )
        }
        func callAsFunction(wallTimeline: Int64, activeTimeline: Int64) throws -> Item? {
            var best: (remaining: Int64, item: Item)?
            for (policy, timeline) in [("wall", wallTimeline), ("active", activeTimeline)] {
                statement.bind([.text(policy)])
                if try statement.step() {
                    let item = Item(statement)
                    let remaining = item.remaining(at: timeline)
                    if best == nil || remaining < best!.remaining { best = (remaining, item) }
                }
            }
            return best?.item
        }
    }

    /// The `limit` soonest active items with their remaining time: the three index range scans
    /// the store uses (running wall, running active, paused), merged.
    final class Soonest {
        let running: RawStatement
        let paused: RawStatement
        init(_ db: RawDatabase) throws {
            running = try db.prepare(
                "SELECT \(itemColumns) FROM countdowns INDEXED BY countdowns_running_by_deadline WHERE state = 'running' AND deadline_ms IS NOT NULL AND policy = ?1 ORDER BY deadline_ms, key LIMIT ?2"
            )
            paused = try db.prepare(
                "SELECT \(itemColumns) FROM countdowns INDEXED BY countdowns_paused_by_remaining WHERE state = 'paused' AND deadline_ms IS NOT NULL ORDER BY deadline_ms - paused_at_ms, key LIMIT ?1"
            )
        }
        func callAsFunction(limit: Int, wallTimeline: Int64, activeTimeline: Int64) throws -> [(Int64, Item)] {
            var ranked: [(Int64, Item)] = []
            for (policy, timeline) in [("wall", wallTimeline), ("active", activeTimeline)] {
                running.bind([.text(policy), .int(Int64(limit))])
                while try running.step() {
                    let item = Item(running)
                    ranked.append((item.remaining(at: timeline), item))
                }
            }
            paused.bind([.int(Int64(limit))])
            while try paused.step() {
                let item = Item(paused)
                ranked.append((item.remaining(at: 0), item))
            }
            ranked.sort { ($0.0, $0.1.key) < ($1.0, $1.1.key) }
            return Array(ranked.prefix(limit))
        }
    }

    /// Marks every running wall countdown due by `timeline` expired and appends its expiry event,
    /// in one transaction; returns how many.
    static func expireDue(_ db: RawDatabase, timeline: Int64, nowMs: Int64, limit: Int) throws -> Int {
        let due = try db.prepare(
            "SELECT \(itemColumns) FROM countdowns INDEXED BY countdowns_running_by_deadline WHERE state = 'running' AND deadline_ms IS NOT NULL AND policy = 'wall' AND deadline_ms <= ?1 ORDER BY deadline_ms, key LIMIT ?2"
        )
        let update = try db.prepare(
            "UPDATE countdowns SET state = 'expired', final_elapsed_ms = ?2, ended_at_ms = ?3, expired_at_ms = ?3, updated_at_ms = ?3 WHERE id = ?1"
        )
        let event = try db.prepare(
            """
            INSERT INTO countdown_events (kind, key, group_name, generation, at_ms, deadline_at_ms, fired_at_ms,
                late_ms, payload, detail)
            VALUES ('expired', ?1, ?2, ?3, ?4, ?5, ?4, ?6, ?7, NULL)
            """)
        try db.execute("BEGIN IMMEDIATE")
        due.bind([.int(timeline), .int(Int64(limit))])
        var items: [Item] = []
        while try due.step() { items.append(Item(due)) }
        for item in items {
            let deadline = item.deadlineMs ?? timeline
            try update.bind([.int(item.id), .int(item.durationMs ?? 0), .int(nowMs)]).run()
            try event.bind([
                .text(item.key), item.group.map(RawValue.text) ?? .null, .int(item.generation), .int(nowMs),
                .int(nowMs - (timeline - deadline)), .int(timeline - deadline), item.payload.map(RawValue.text) ?? .null,
            ]).run()
        }
        try db.execute("COMMIT")
        return items.count
    }

    /// The subscribed items read by key and their remaining time computed and sorted: what a
    /// display refresh without the store's in-memory ticks costs.
    static func tickRefresh(_ db: RawDatabase, keys: [String], timeline: Int64, chunk: RawStatement, chunkSize: Int) throws -> Int {
        var ranked: [(Int64, Item)] = []
        ranked.reserveCapacity(keys.count)
        for start in stride(from: 0, to: keys.count, by: chunkSize) {
            chunk.bind(keys[start..<min(start + chunkSize, keys.count)].map(RawValue.text))
            while try chunk.step() {
                let item = Item(chunk)
                ranked.append((item.remaining(at: timeline), item))
            }
        }
        ranked.sort { ($0.0, $0.1.key) < ($1.0, $1.1.key) }
        return ranked.count
    }
}
