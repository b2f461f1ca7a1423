import Foundation
import GRDB

/// What an event records.
enum EventKind: String, Sendable {
    case started, stopwatchStarted = "stopwatch_started", replaced
    case paused, resumed, cancelled, restarted, extended, shortened, expired, removed
    case hostSuspended = "host_suspended", hostResumed = "host_resumed"
    case calibrated, clockEdited = "clock_edited", pruned
}

/// One row of the `countdown_events` table.
struct EventRecord: Sendable, Hashable {
    var id: Int64?
    var kind: String
    var key: String?
    var group: String?
    var generation: Int64?
    var atMs: Int64
    var deadlineAtMs: Int64?
    var firedAtMs: Int64?
    var lateMs: Int64?
    var payload: CountdownPayload?
    var detail: String?

    init(
        _ kind: EventKind, item: ItemRecord? = nil, at time: StoreTime,
        deadlineAtMs: Int64? = nil, firedAtMs: Int64? = nil, lateMs: Int64? = nil,
        payload: CountdownPayload? = nil, detail: [String: Int64]? = nil
    ) {
        self.kind = kind.rawValue
        self.key = item?.key
        self.group = item?.group
        self.generation = item?.generation
        self.atMs = time.wall
        self.deadlineAtMs = deadlineAtMs
        self.firedAtMs = firedAtMs
        self.lateMs = lateMs
        self.payload = payload
        self.detail = detail.map { fields in
            "{" + fields.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
        }
    }
}

extension EventRecord: FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "countdown_events"

    init(row: Row) throws {
        id = try row.decode(forColumn: "id")
        kind = try row.decode(forColumn: "kind")
        key = try row.decode(forColumn: "key")
        group = try row.decode(forColumn: "group_name")
        generation = try row.decode(forColumn: "generation")
        atMs = try row.decode(forColumn: "at_ms")
        deadlineAtMs = try row.decode(forColumn: "deadline_at_ms")
        firedAtMs = try row.decode(forColumn: "fired_at_ms")
        lateMs = try row.decode(forColumn: "late_ms")
        payload = CountdownPayload(databaseValue: try row.decode(DatabaseValue.self, forColumn: "payload"))
        detail = try row.decode(forColumn: "detail")
    }

    func encode(to container: inout PersistenceContainer) {
        container["id"] = id
        container["kind"] = kind
        container["key"] = key
        container["group_name"] = group
        container["generation"] = generation
        container["at_ms"] = atMs
        container["deadline_at_ms"] = deadlineAtMs
        container["fired_at_ms"] = firedAtMs
        container["late_ms"] = lateMs
        container["payload"] = payload?.databaseValue
        container["detail"] = detail
    }

    mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }
}
