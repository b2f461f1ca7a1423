import Foundation
import GRDB

/// One row of the `countdowns` table, as stored.
struct ItemRecord: Sendable, Hashable {
    var id: Int64?
    var key: String
    var group: String?
    var kind: CountdownKind
    var policy: CountdownPolicy
    var state: CountdownState
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
    var payload: CountdownPayload?
    var updatedAtMs: Int64
}

extension ItemRecord: FetchableRecord {
    /// Every column, in the order ``init(row:)`` and ``arguments`` use: queries select exactly
    /// these, so rows decode by position rather than by name.
    static let columns = """
        id, key, group_name, kind, policy, state, duration_ms, generation, start_offset_ms, gap_at_start_ms, \
        started_at_ms, paused_ms, paused_at_ms, deadline_ms, final_elapsed_ms, ended_at_ms, expired_at_ms, \
        payload, updated_at_ms
        """

    /// `SELECT <every column> FROM countdowns`.
    static let select = "SELECT \(columns) FROM countdowns"

    static let insertSQL = """
        INSERT INTO countdowns (\(columns))
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """

    static let updateSQL = """
        UPDATE countdowns SET id = ?1, key = ?2, group_name = ?3, kind = ?4, policy = ?5, state = ?6,
            duration_ms = ?7, generation = ?8, start_offset_ms = ?9, gap_at_start_ms = ?10, started_at_ms = ?11,
            paused_ms = ?12, paused_at_ms = ?13, deadline_ms = ?14, final_elapsed_ms = ?15, ended_at_ms = ?16,
            expired_at_ms = ?17, payload = ?18, updated_at_ms = ?19
        WHERE id = ?1
        """

    /// Decodes a row of ``columns``; a damaged value throws rather than traps.
    init(row: Row) throws {
        id = try row.decode(atIndex: 0)
        key = try row.decode(atIndex: 1)
        group = try row.decode(atIndex: 2)
        kind = try Self.decode(try row.decode(atIndex: 3), as: CountdownKind.self, column: "kind")
        policy = try Self.decode(try row.decode(atIndex: 4), as: CountdownPolicy.self, column: "policy")
        state = try Self.decode(try row.decode(atIndex: 5), as: CountdownState.self, column: "state")
        durationMs = try row.decode(atIndex: 6)
        generation = try row.decode(atIndex: 7)
        startOffsetMs = try row.decode(atIndex: 8)
        gapAtStartMs = try row.decode(atIndex: 9)
        startedAtMs = try row.decode(atIndex: 10)
        pausedMs = try row.decode(atIndex: 11)
        pausedAtMs = try row.decode(atIndex: 12)
        deadlineMs = try row.decode(atIndex: 13)
        finalElapsedMs = try row.decode(atIndex: 14)
        endedAtMs = try row.decode(atIndex: 15)
        expiredAtMs = try row.decode(atIndex: 16)
        payload = CountdownPayload(databaseValue: try row.decode(DatabaseValue.self, atIndex: 17))
        updatedAtMs = try row.decode(atIndex: 18)
    }

    private static func decode<T: RawRepresentable<String>>(_ raw: String, as: T.Type, column: String) throws -> T {
        guard let value = T(rawValue: raw) else {
            throw CountdownError(.unreadableDatabase, "unexpected \(column) \(quoted(raw)) in the countdowns table")
        }
        return value
    }

    /// The values of ``columns``, in order.
    var arguments: StatementArguments {
        [
            id, key, group, kind.rawValue, policy.rawValue, state.rawValue, durationMs, generation, startOffsetMs,
            gapAtStartMs, startedAtMs, pausedMs, pausedAtMs, deadlineMs, finalElapsedMs, endedAtMs, expiredAtMs,
            payload?.databaseValue, updatedAtMs,
        ]
    }
}

extension CountdownPayload {
    /// Text is stored as TEXT, bytes as BLOB.
    var databaseValue: DatabaseValue {
        switch self {
        case .text(let text): text.databaseValue
        case .bytes(let data): data.databaseValue
        }
    }

    init?(databaseValue: DatabaseValue) {
        switch databaseValue.storage {
        case .string(let text): self = .text(text)
        case .blob(let data): self = .bytes(data)
        case .null: return nil
        case .int64(let value): self = .text(String(value))
        case .double(let value): self = .text(String(value))
        }
    }
}
