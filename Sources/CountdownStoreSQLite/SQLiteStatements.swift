import CountdownStoreCore
import CountdownStoreSQL
import Foundation

// The SQLite statements that write the records, and their bindings. The core decodes the rows
// (`RecordRow`); this file binds them in the same column order.

extension ItemRecord {
    /// Every column, in the order the core decodes (``ItemRecord/init(row:)``) and ``bind(_:)``
    /// binds: queries select exactly these, so rows decode by position rather than by name.
    static let columns = selectedColumns

    /// `SELECT <every column> FROM countdowns`.
    static let select = "SELECT \(columns) FROM countdowns"

    /// Inserts a new key, binding ``bind(_:)``'s values; does nothing when the key exists.
    static let insertNewSQL = """
        INSERT INTO countdowns (\(columns))
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (key) DO NOTHING
        """

    /// What ``ItemRecord/expire(at:)`` changes in an item, and nothing else, as
    /// `recordExpiries(_:events:)` writes it (the server engine's statement sets the same columns):
    /// an `UPDATE` of every column would also rewrite the entries of the indexes whose columns
    /// stay as they were, the key's among them, for each expiry of a batch.
    static let expireSQL = """
        UPDATE countdowns SET state = 'expired', paused_at_ms = NULL, deadline_ms = NULL, final_elapsed_ms = ?2,
            ended_at_ms = ?3, expired_at_ms = ?4, updated_at_ms = ?5
        WHERE id = ?1
        """

    static let updateSQL = """
        UPDATE countdowns SET id = ?1, key = ?2, group_name = ?3, kind = ?4, policy = ?5, state = ?6,
            duration_ms = ?7, generation = ?8, start_offset_ms = ?9, gap_at_start_ms = ?10, started_at_ms = ?11,
            paused_ms = ?12, paused_at_ms = ?13, deadline_ms = ?14, final_elapsed_ms = ?15, ended_at_ms = ?16,
            expired_at_ms = ?17, payload = ?18, updated_at_ms = ?19, rule = ?20, max_wait_ms = ?21
        WHERE id = ?1
        """

    /// Binds the values of ``columns``, in order.
    func bind(_ values: inout SQLiteBindings) {
        values.add(id)
        values.add(key)
        values.add(group)
        values.add(kind)
        values.add(policy)
        values.add(state)
        values.add(durationMs)
        values.add(generation)
        values.add(startOffsetMs)
        values.add(gapAtStartMs)
        values.add(startedAtMs)
        values.add(pausedMs)
        values.add(pausedAtMs)
        values.add(deadlineMs)
        values.add(finalElapsedMs)
        values.add(endedAtMs)
        values.add(expiredAtMs)
        values.add(payload)
        values.add(updatedAtMs)
        values.add(rule)
        values.add(maxWaitMs)
    }
}

extension EventRecord {
    /// Every column, in the order the core decodes (``EventRecord/init(row:)``) and ``bind(_:)`` binds.
    static let columns = selectedColumns

    static let insertSQL = "INSERT INTO countdown_events (\(columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

    /// The most events one statement inserts (``insertSQL(rows:)``): 352 parameters, within the
    /// 999 of SQLite builds older than 3.32.
    static let rowsPerInsert = 32

    /// `INSERT` of `rows` events (1 to ``rowsPerInsert``) in one statement, each bound as
    /// ``bind(_:)`` binds one: SQLite numbers them in the order of their rows, and a table with
    /// `AUTOINCREMENT` reads and writes its sequence once per statement, not once per row.
    static func insertSQL(rows: Int) -> String {
        insertSQLs[max(1, min(rows, rowsPerInsert)) - 1]
    }

    private static let insertSQLs = (1...rowsPerInsert).map { rows in
        "INSERT INTO countdown_events (\(columns)) VALUES "
            + repeatElement("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", count: rows).joined(separator: ", ")
    }

    /// Binds the values of ``columns``, in order.
    func bind(_ values: inout SQLiteBindings) {
        values.add(id)
        values.add(kind)
        values.add(key)
        values.add(group)
        values.add(generation)
        values.add(atMs)
        values.add(deadlineAtMs)
        values.add(firedAtMs)
        values.add(lateMs)
        values.add(payload)
        values.add(detail)
    }
}
