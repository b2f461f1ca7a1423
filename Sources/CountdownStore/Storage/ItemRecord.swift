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

extension ItemRecord: FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "countdowns"

    init(row: Row) throws {
        id = try row.decode(forColumn: "id")
        key = try row.decode(forColumn: "key")
        group = try row.decode(forColumn: "group_name")
        kind = try Self.decode(try row.decode(forColumn: "kind"), as: CountdownKind.self, column: "kind")
        policy = try Self.decode(try row.decode(forColumn: "policy"), as: CountdownPolicy.self, column: "policy")
        state = try Self.decode(try row.decode(forColumn: "state"), as: CountdownState.self, column: "state")
        durationMs = try row.decode(forColumn: "duration_ms")
        generation = try row.decode(forColumn: "generation")
        startOffsetMs = try row.decode(forColumn: "start_offset_ms")
        gapAtStartMs = try row.decode(forColumn: "gap_at_start_ms")
        startedAtMs = try row.decode(forColumn: "started_at_ms")
        pausedMs = try row.decode(forColumn: "paused_ms")
        pausedAtMs = try row.decode(forColumn: "paused_at_ms")
        deadlineMs = try row.decode(forColumn: "deadline_ms")
        finalElapsedMs = try row.decode(forColumn: "final_elapsed_ms")
        endedAtMs = try row.decode(forColumn: "ended_at_ms")
        expiredAtMs = try row.decode(forColumn: "expired_at_ms")
        payload = CountdownPayload(databaseValue: try row.decode(DatabaseValue.self, forColumn: "payload"))
        updatedAtMs = try row.decode(forColumn: "updated_at_ms")
    }

    private static func decode<T: RawRepresentable<String>>(_ raw: String, as: T.Type, column: String) throws -> T {
        guard let value = T(rawValue: raw) else {
            throw CountdownError(.unreadableDatabase, "unexpected \(column) \(quoted(raw)) in the countdowns table")
        }
        return value
    }

    func encode(to container: inout PersistenceContainer) {
        container["id"] = id
        container["key"] = key
        container["group_name"] = group
        container["kind"] = kind.rawValue
        container["policy"] = policy.rawValue
        container["state"] = state.rawValue
        container["duration_ms"] = durationMs
        container["generation"] = generation
        container["start_offset_ms"] = startOffsetMs
        container["gap_at_start_ms"] = gapAtStartMs
        container["started_at_ms"] = startedAtMs
        container["paused_ms"] = pausedMs
        container["paused_at_ms"] = pausedAtMs
        container["deadline_ms"] = deadlineMs
        container["final_elapsed_ms"] = finalElapsedMs
        container["ended_at_ms"] = endedAtMs
        container["expired_at_ms"] = expiredAtMs
        container["payload"] = payload?.databaseValue
        container["updated_at_ms"] = updatedAtMs
    }

    mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
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
