import CountdownStoreCore
import CountdownStoreSQL
import Foundation

/// The statements a store's transactions send most, written once per engine (they name the
/// store's schema).
struct PostgresStatements: Sendable {
    /// The statements both engines run (`CountdownStoreSQL`), in this store's schema.
    let shared: SQLStatements
    /// The checkpoint, the lease, the two soonest deadlines and the server's clock, in one row.
    let clocks: String
    /// The insert of a new item whose generation follows its key's retired one, if any; nothing
    /// when the key exists. Every value is cast: in a SELECT, a null parameter has no type of its own.
    let insertNew: String
    /// The update of every column of an item, by id.
    let update: String
    /// The last event ID numbered, committed or not (0 before the first).
    let lastNumberedEvent: String
    /// The second keys of the event writers' locks held now (see ``PostgresTransaction/flushEvents()``).
    let eventWriterFloors = """
        SELECT objid::bigint FROM pg_locks
        WHERE locktype = 'advisory' AND classid = $1::bigint::oid AND objsubid = 2 AND granted
            AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
        """
    private let prefix: String
    private let oneEvent: String
    private let oneEventNotifying: String

    /// The columns of an event as inserted, and the types their values are cast to (with `ord`).
    static let eventColumns =
        "kind, key, group_name, generation, at_ms, deadline_at_ms, fired_at_ms, late_ms, payload, payload_bytes, detail"
    static let eventTypes = [
        "text", "text", "text", "bigint", "bigint", "bigint", "bigint", "bigint", "text", "bytea", "text", "int",
    ]

    private let insertColumns: String
    private let insertTypes: [String]

    /// ``insertNew`` for `count` items in one statement, each item's values in turn; it returns
    /// the `id`, `generation` and `key` of each item inserted (in no particular order).
    func insertNew(count: Int) -> String {
        let width = insertTypes.count
        let names = insertTypes.indices.map { "c\($0 + 1)" }
        let rows = (0..<count).map { row in
            "("
                + insertTypes.enumerated().map { "$\(row * width + $0.offset + 1)::\($0.element)" }.joined(
                    separator: ", ") + ")"
        }
        let selected = names.enumerated().map { index, name in
            index == 6
                ? "greatest(v.\(name), coalesce((SELECT r.generation + 1 FROM \(prefix)countdown_retired_keys AS r "
                    + "WHERE r.key = v.c1), 0))"
                : "v.\(name)"
        }
        return """
            INSERT INTO \(prefix)countdowns (\(insertColumns)) SELECT \(selected.joined(separator: ", "))
            FROM (VALUES \(rows.joined(separator: ", "))) AS v(\(names.joined(separator: ", ")))
            ON CONFLICT (key) DO NOTHING RETURNING id, generation, key
            """
    }

    init(prefix schemaPrefix: String, insertColumns: String, insertTypes: [String]) {
        prefix = schemaPrefix
        shared = SQLStatements(.postgres(tablePrefix: schemaPrefix))
        self.insertColumns = insertColumns
        self.insertTypes = insertTypes
        lastNumberedEvent = "SELECT coalesce(pg_sequence_last_value(\(Self.eventSequence(prefix: schemaPrefix))), 0)"
        // A function of the schema (migration 0003): the server plans its query once per connection.
        clocks = "SELECT * FROM \(schemaPrefix)countdown_clocks()"
        let marks = insertTypes.indices.map { index in
            index == 6
                ? "greatest($7::bigint, coalesce((SELECT generation + 1 FROM \(schemaPrefix)countdown_retired_keys "
                    + "WHERE key = $1::text), 0))"
                : "$\(index + 1)::\(insertTypes[index])"
        }
        insertNew = """
            INSERT INTO \(schemaPrefix)countdowns (\(insertColumns)) SELECT \(marks.joined(separator: ", "))
            ON CONFLICT (key) DO NOTHING RETURNING id, generation
            """
        update = """
            UPDATE \(schemaPrefix)countdowns SET key = $2, group_name = $3, kind = $4, policy = $5, state = $6,
                duration_ms = $7, generation = $8, start_offset_ms = $9, gap_at_start_ms = $10, started_at_ms = $11,
                paused_ms = $12, paused_at_ms = $13, deadline_ms = $14, final_elapsed_ms = $15, ended_at_ms = $16,
                expired_at_ms = $17, payload = $18, payload_bytes = $19, updated_at_ms = $20, rule = $21,
                max_wait_ms = $22
            WHERE id = $1
            """
        oneEvent = Self.insertEvents(prefix: schemaPrefix, count: 1, notifying: false)
        oneEventNotifying = Self.insertEvents(prefix: schemaPrefix, count: 1, notifying: true)
        // The item's columns, the lock class, the NOTIFY, the event's columns but its generation and `ord`.
        let types =
            insertTypes + ["int", "text", "text"]
            + Self.eventTypes.dropLast().enumerated().filter { $0.offset != 3 }.map(\.element)
        let arguments = types.enumerated().map { "$\($0.offset + 1)::\($0.element)" }
        insertNewWithEvent =
            "SELECT * FROM \(schemaPrefix)countdown_insert_with_event(\(arguments.joined(separator: ", ")))"
    }

    /// ``insertNew`` and, if it inserted, the item's event under its writer's lock (class $22),
    /// and a NOTIFY on channel $23 of $24 when $23 is not null; the event's values follow
    /// (without its generation: the item's). A function of the schema (migrations 0003, 0006).
    let insertNewWithEvent: String

    /// The insert of `count` events under this writer's lock (class $1), with a NOTIFY ($2, $3) when
    /// `notifying`; each event's values follow, in ``eventTypes`` order.
    func insertEvents(count: Int, notifying: Bool) -> String {
        if count == 1 { return notifying ? oneEventNotifying : oneEvent }
        return Self.insertEvents(prefix: prefix, count: count, notifying: notifying)
    }

    /// The event sequence, as a `regclass` literal.
    private static func eventSequence(prefix schemaPrefix: String) -> String {
        "'" + (schemaPrefix + "countdown_events_id_seq").replacingOccurrences(of: "'", with: "''") + "'::regclass"
    }

    private static func insertEvents(prefix schemaPrefix: String, count: Int, notifying: Bool) -> String {
        var next = notifying ? 4 : 2
        var rows: [String] = []
        rows.reserveCapacity(count)
        for _ in 0..<count {
            let marks = eventTypes.map { type in
                defer { next += 1 }
                return "$\(next)::\(type)"
            }
            rows.append("(" + marks.joined(separator: ", ") + ")")
        }
        let lock = "\(schemaPrefix)countdown_lock_event_writer($1::int)" + (notifying ? ", pg_notify($2, $3)" : "")
        // The lock is taken before any ID is drawn: no row of the join exists before its one row.
        return """
            WITH locked AS MATERIALIZED (SELECT \(lock))
            INSERT INTO \(schemaPrefix)countdown_events (\(eventColumns))
            SELECT \(eventColumns) FROM locked, (VALUES \(rows.joined(separator: ", "))) AS v(\(eventColumns), ord)
            ORDER BY ord
            """
    }
}
