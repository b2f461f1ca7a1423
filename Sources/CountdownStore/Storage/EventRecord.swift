import Foundation

/// What an event records.
package enum EventKind: String, Sendable {
    case started, stopwatchStarted = "stopwatch_started", replaced
    case paused, resumed, cancelled, restarted, extended, shortened, expired, removed
    case hostSuspended = "host_suspended", hostResumed = "host_resumed"
    case calibrated, clockEdited = "clock_edited", pruned, consumerStale = "consumer_stale"
}

/// One row of the `countdown_events` table.
package struct EventRecord: Sendable, Hashable {
    package var id: Int64?
    package var kind: String
    package var key: String?
    package var group: String?
    package var generation: Int64?
    package var atMs: Int64
    package var deadlineAtMs: Int64?
    package var firedAtMs: Int64?
    package var lateMs: Int64?
    package var payload: CountdownPayload?
    package var detail: String?

    package init(
        _ kind: EventKind, item: ItemRecord? = nil, at time: some ClockInstant,
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
            if fields.count == 1, let (key, value) = fields.first { return "{\"\(key)\":\(value)}" }  // most events
            return "{" + fields.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
        }
    }
}

extension EventRecord {
    /// Every column, in the order ``init(_:)`` and ``bind(_:)`` use.
    static let columns = "id, kind, key, group_name, generation, at_ms, deadline_at_ms, fired_at_ms, late_ms, payload, detail"

    /// `SELECT <every column> FROM countdown_events`.
    static let select = "SELECT \(columns) FROM countdown_events"

    static let insertSQL = "INSERT INTO countdown_events (\(columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

    /// Decodes a row of ``columns``; a damaged value throws rather than traps.
    init(_ row: Columns) throws {
        id = try row.int(0)
        kind = try row.text(1)
        key = row.optionalText(2)
        group = row.optionalText(3)
        generation = row.optionalInt(4)
        atMs = try row.int(5)
        deadlineAtMs = row.optionalInt(6)
        firedAtMs = row.optionalInt(7)
        lateMs = row.optionalInt(8)
        payload = row.payload(9)
        detail = row.optionalText(10)
    }

    /// Binds the values of ``columns``, in order.
    func bind(_ values: inout Bindings) {
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
