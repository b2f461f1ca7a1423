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

extension EventRecord: FetchableRecord {
    /// Every column, in the order ``init(row:)`` and ``arguments`` use.
    static let columns = "id, kind, key, group_name, generation, at_ms, deadline_at_ms, fired_at_ms, late_ms, payload, detail"

    /// `SELECT <every column> FROM countdown_events`.
    static let select = "SELECT \(columns) FROM countdown_events"

    static let insertSQL = "INSERT INTO countdown_events (\(columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

    /// Decodes a row of ``columns``; a damaged value throws rather than traps.
    init(row: Row) throws {
        id = try row.decode(atIndex: 0)
        kind = try row.decode(atIndex: 1)
        key = try row.decode(atIndex: 2)
        group = try row.decode(atIndex: 3)
        generation = try row.decode(atIndex: 4)
        atMs = try row.decode(atIndex: 5)
        deadlineAtMs = try row.decode(atIndex: 6)
        firedAtMs = try row.decode(atIndex: 7)
        lateMs = try row.decode(atIndex: 8)
        payload = CountdownPayload(databaseValue: try row.decode(DatabaseValue.self, atIndex: 9))
        detail = try row.decode(atIndex: 10)
    }

    /// The values of ``columns``, in order.
    var arguments: StatementArguments {
        [id, kind, key, group, generation, atMs, deadlineAtMs, firedAtMs, lateMs, payload?.databaseValue, detail]
    }
}
