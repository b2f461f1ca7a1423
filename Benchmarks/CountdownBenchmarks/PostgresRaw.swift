import Foundation
import PostgresNIO
import CountdownStorePostgres

/// The raw PostgreSQL side of the benchmarks: the statements the store's PostgreSQL engine runs
/// for the same work, sent through a `PostgresClient` with nothing else (no clock row, no
/// engine thread, no retired-key lookup).
///
/// Every statement is sent the way the engine sends its own (an unnamed statement, parameters
/// bound), so the ratio shows what the store adds, not a difference of protocol.
enum PostgresRaw {
    /// The countdown columns every read selects, in the engine's order.
    static let itemColumns = """
        id, key, group_name, kind, policy, state, duration_ms, generation, start_offset_ms, gap_at_start_ms, \
        started_at_ms, paused_ms, paused_at_ms, deadline_ms, final_elapsed_ms, ended_at_ms, expired_at_ms, \
        payload, payload_bytes, updated_at_ms
        """

    /// A value to bind.
    enum Value {
        case int(Int64)
        case text(String)
        case null
    }

    /// `sql` with `values` bound to `$1`, `$2`, …
    static func query(_ sql: String, _ values: [Value] = []) -> PostgresQuery {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values {
            switch value {
            case .int(let number): bindings.append(number)
            case .text(let text): bindings.append(text)
            case .null: bindings.appendNull()
            }
        }
        return PostgresQuery(unsafeSQL: sql, binds: bindings)
    }

    /// The `PostgresClient` configuration for `url`, read as the store reads its URLs
    /// (`?host=`, `?sslmode=`); the pool keeps postgres-nio's default size, as the store's own
    /// client does.
    static func configuration(url text: String) throws -> PostgresClient.Configuration {
        try PostgresConnectionString(text).clientConfiguration
    }

    /// One item as read back: every column, decoded (as the engine decodes its rows).
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
        var payloadBytes: ByteBuffer?
        var updatedAtMs: Int64

        /// Decodes a row of ``PostgresRaw/itemColumns``.
        init(_ row: PostgresRow) throws {
            let r = row.makeRandomAccess()
            id = try r[0].decode(Int64.self)
            key = try r[1].decode(String.self)
            group = try r[2].decode(String?.self)
            kind = try r[3].decode(String.self)
            policy = try r[4].decode(String.self)
            state = try r[5].decode(String.self)
            durationMs = try r[6].decode(Int64?.self)
            generation = try r[7].decode(Int64.self)
            startOffsetMs = try r[8].decode(Int64.self)
            gapAtStartMs = try r[9].decode(Int64.self)
            startedAtMs = try r[10].decode(Int64.self)
            pausedMs = try r[11].decode(Int64.self)
            pausedAtMs = try r[12].decode(Int64?.self)
            deadlineMs = try r[13].decode(Int64?.self)
            finalElapsedMs = try r[14].decode(Int64?.self)
            endedAtMs = try r[15].decode(Int64?.self)
            expiredAtMs = try r[16].decode(Int64?.self)
            payload = try r[17].decode(String?.self)
            payloadBytes = try r[18].decode(ByteBuffer?.self)
            updatedAtMs = try r[19].decode(Int64.self)
        }

        /// Remaining time on the item's timeline at `timeline`: what a display shows.
        func remaining(at timeline: Int64) -> Int64 {
            guard let deadlineMs else { return .max }
            if state == "paused", let pausedAtMs { return deadlineMs - pausedAtMs }
            return max(0, deadlineMs - timeline)
        }
    }

    /// The statements of one start, for the tables under `prefix` (`"schema".`).
    struct Statements {
        let insertItem: String
        let insertStartEvent: String

        /// The statements for the tables under `prefix`.
        init(prefix: String) {
            insertItem = """
                INSERT INTO \(prefix)countdowns (key, group_name, kind, policy, state, duration_ms, generation,
                    start_offset_ms, gap_at_start_ms, started_at_ms, paused_ms, paused_at_ms, deadline_ms, final_elapsed_ms,
                    ended_at_ms, expired_at_ms, payload, payload_bytes, updated_at_ms)
                VALUES ($1, $2, 'countdown', 'wall', 'running', $3, 1, 0, 0, $4, 0, NULL, $3, NULL, NULL, NULL, NULL, NULL, $4)
                """
            insertStartEvent = """
                INSERT INTO \(prefix)countdown_events (kind, key, group_name, generation, at_ms, deadline_at_ms, fired_at_ms,
                    late_ms, payload, payload_bytes, detail)
                VALUES ('started', $1, $2, 1, $3, NULL, NULL, NULL, NULL, NULL, $4)
                """
        }

        /// Inserts countdown `index` (key `prefix` + index) and its start event on `connection`.
        func start(
            _ connection: PostgresConnection, keyPrefix: String, index: Int, groups: Int, nowMs: Int64, logger: Logger
        ) async throws {
            let key = "\(keyPrefix)\(index)"
            let group = "g\(index % groups)"
            let duration = Int64(3_600_000 + index)
            try await connection.query(
                PostgresRaw.query(insertItem, [.text(key), .text(group), .int(duration), .int(nowMs)]), logger: logger)
            try await connection.query(
                PostgresRaw.query(
                    insertStartEvent, [.text(key), .text(group), .int(nowMs), .text("{\"duration_ms\":\(duration)}")]),
                logger: logger)
        }
    }

    /// Inserts `count` countdowns and their start events in one transaction, set-based: 10,000
    /// at a time, the items with one `INSERT … SELECT` of `unnest`ed arrays and their events
    /// with a second one in the same statement (as fast as the server takes rows).
    static func bulkInsert(
        _ client: PostgresClient, prefix: String, keyPrefix: String, count: Int, groups: Int, nowMs: Int64, logger: Logger
    ) async throws {
        let sql = """
            WITH items AS (
                INSERT INTO \(prefix)countdowns (key, group_name, kind, policy, state, duration_ms, generation,
                    start_offset_ms, gap_at_start_ms, started_at_ms, paused_ms, deadline_ms, updated_at_ms)
                SELECT u.key, u.group_name, 'countdown', 'wall', 'running', u.duration_ms, 1, 0, 0, $4, 0,
                    u.duration_ms, $4
                FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS u(key, group_name, duration_ms, o)
                ORDER BY u.o
                RETURNING key, group_name, duration_ms
            )
            INSERT INTO \(prefix)countdown_events (kind, key, group_name, generation, at_ms, detail)
            SELECT 'started', key, group_name, 1, $4, '{"duration_ms":' || duration_ms || '}' FROM items
            """
        try await client.withTransaction(logger: logger) { connection in
            for first in stride(from: 0, to: count, by: 10_000) {
                let indices = first..<min(count, first + 10_000)
                var bindings = PostgresBindings(capacity: 4)
                bindings.append(indices.map { "\(keyPrefix)\($0)" })
                bindings.append(indices.map { "g\($0 % groups)" })
                bindings.append(indices.map { Int64(3_600_000 + $0) })
                bindings.append(nowMs)
                try await connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger)
            }
        }
    }

    /// Inserts the countdowns `indices`, one transaction each, on a connection of `client`'s
    /// pool for each transaction.
    static func singleInserts(
        _ client: PostgresClient, prefix: String, keyPrefix: String, indices: some Sequence<Int>, groups: Int, nowMs: Int64,
        logger: Logger
    ) async throws {
        let statements = Statements(prefix: prefix)
        for index in indices {
            try await client.withTransaction(logger: logger) { connection in
                try await statements.start(connection, keyPrefix: keyPrefix, index: index, groups: groups, nowMs: nowMs, logger: logger)
            }
        }
    }

    /// The statement the engine runs for running countdowns of one policy not yet due, soonest first.
    static func runningSQL(prefix: String) -> String {
        """
        SELECT \(itemColumns) FROM \(prefix)countdowns
        WHERE state = 'running' AND deadline_ms IS NOT NULL AND policy = $1 AND deadline_ms > $2
        ORDER BY deadline_ms, key LIMIT $3
        """
    }

    /// The rows of `sql` bound to `values`, decoded.
    static func items(_ client: PostgresClient, _ sql: String, _ values: [Value], logger: Logger) async throws -> [Item] {
        var items: [Item] = []
        for try await row in try await client.query(query(sql, values), logger: logger) {
            items.append(try Item(row))
        }
        return items
    }

    /// The running countdown of each policy with the earliest deadline, from the index the
    /// store uses; the sooner of the two.
    static func nextDeadline(
        _ client: PostgresClient, prefix: String, wallTimeline: Int64, activeTimeline: Int64, logger: Logger
    ) async throws -> Item? {
        let sql = runningSQL(prefix: prefix)
        var best: (remaining: Int64, item: Item)?
        for (policy, timeline) in [("wall", wallTimeline), ("active", activeTimeline)] {
            if let item = try await items(client, sql, [.text(policy), .int(timeline), .int(1)], logger: logger).first {
                let remaining = item.remaining(at: timeline)
                if best == nil || remaining < best!.remaining { best = (remaining, item) }
            }
        }
        return best?.item
    }

    /// The `limit` soonest active items with their remaining time: the three index range scans
    /// the store uses (running wall, running active, paused), merged.
    static func soonest(
        _ client: PostgresClient, prefix: String, limit: Int, wallTimeline: Int64, activeTimeline: Int64, logger: Logger
    ) async throws -> [(Int64, Item)] {
        let running = runningSQL(prefix: prefix)
        var ranked: [(Int64, Item)] = []
        for (policy, timeline) in [("wall", wallTimeline), ("active", activeTimeline)] {
            for item in try await items(client, running, [.text(policy), .int(timeline), .int(Int64(limit))], logger: logger) {
                ranked.append((item.remaining(at: timeline), item))
            }
        }
        let paused = """
            SELECT \(itemColumns) FROM \(prefix)countdowns WHERE state = 'paused' AND deadline_ms IS NOT NULL
            ORDER BY (deadline_ms - paused_at_ms), key LIMIT $1
            """
        for item in try await items(client, paused, [.int(Int64(limit))], logger: logger) {
            ranked.append((item.remaining(at: 0), item))
        }
        ranked.sort { ($0.0, $0.1.key) < ($1.0, $1.1.key) }
        return Array(ranked.prefix(limit))
    }

    /// Marks every running wall countdown due by `timeline` expired and appends its expiry event,
    /// in one transaction; returns how many.
    static func expireDue(
        _ client: PostgresClient, prefix: String, timeline: Int64, nowMs: Int64, limit: Int, logger: Logger
    ) async throws -> Int {
        let due = """
            SELECT \(itemColumns) FROM \(prefix)countdowns
            WHERE state = 'running' AND deadline_ms IS NOT NULL AND policy = 'wall' AND deadline_ms <= $1
            ORDER BY deadline_ms, key LIMIT $2
            """
        let update = """
            UPDATE \(prefix)countdowns SET state = 'expired', final_elapsed_ms = $2, ended_at_ms = $3, expired_at_ms = $3,
                updated_at_ms = $3
            WHERE id = $1
            """
        let event = """
            INSERT INTO \(prefix)countdown_events (kind, key, group_name, generation, at_ms, deadline_at_ms, fired_at_ms,
                late_ms, payload, payload_bytes, detail)
            VALUES ('expired', $1, $2, $3, $4, $5, $4, $6, $7, NULL, NULL)
            """
        return try await client.withTransaction(logger: logger) { connection in
            var items: [Item] = []
            for try await row in try await connection.query(query(due, [.int(timeline), .int(Int64(limit))]), logger: logger) {
                items.append(try Item(row))
            }
            for item in items {
                let deadline = item.deadlineMs ?? timeline
                try await connection.query(query(update, [.int(item.id), .int(item.durationMs ?? 0), .int(nowMs)]), logger: logger)
                try await connection.query(
                    query(
                        event,
                        [
                            .text(item.key), item.group.map(Value.text) ?? .null, .int(item.generation), .int(nowMs),
                            .int(nowMs - (timeline - deadline)), .int(timeline - deadline), item.payload.map(Value.text) ?? .null,
                        ]),
                    logger: logger)
            }
            return items.count
        }
    }
}
