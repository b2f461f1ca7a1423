import Foundation

/// What an event records.
package enum EventKind: String, Sendable, CaseIterable {
    case started, stopwatchStarted = "stopwatch_started", replaced
    case paused, resumed, cancelled, restarted, extended, shortened, postponed, expired, removed
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
            return "{" + fields.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",")
                + "}"
        }
    }
}
