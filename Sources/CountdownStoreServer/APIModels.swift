import CountdownStoreCore
import Foundation

// The JSON the HTTP API reads and writes. Items are the objects of `countdown show --json`
// (``Countdown``'s own `Codable`); everything else is defined here.

/// `POST api/countdowns`: what to start.
struct StartBody: Decodable, Sendable {
    var key: String
    /// A duration as the tool reads it (`90s`, `15m`, `1h30m`, `PT15M`, seconds); absent for a stopwatch.
    var duration: String?
    var group: String?
    /// `wall` (the default) or `active`.
    var policy: String?
    var payload: String?
    /// `countdown` (the default) or `stopwatch`.
    var kind: String?
    /// What to do when the key is active: `refuse` (the default), `keep` or `replace`.
    var whenActive: String?

    enum CodingKeys: String, CodingKey {
        case key, duration, group, policy, payload, kind
        case whenActive = "when_active"
    }
}

/// `POST api/countdowns/{key}/extend` and `…/shorten`: by how much.
struct AmountBody: Decodable, Sendable {
    var duration: String
}

/// `POST api/countdowns/{key}/cooldown`: how long the cooldown lasts, and what it starts with.
struct CooldownBody: Decodable, Sendable {
    /// A duration as `StartBody`'s.
    var duration: String?
    var group: String?
    /// `wall` (the default) or `active`.
    var policy: String?
    var payload: String?
}

/// `POST api/countdowns/{key}/debounce`: the quiet period, the maximum wait, and what a burst
/// starts with.
struct DebounceBody: Decodable, Sendable {
    /// Durations as `StartBody`'s.
    var quiet: String?
    var maxWait: String?
    var group: String?
    /// `wall` (the default) or `active`.
    var policy: String?
    var payload: String?

    enum CodingKeys: String, CodingKey {
        case quiet, group, policy, payload
        case maxWait = "max_wait"
    }
}

/// What `POST api/countdowns/{key}/cooldown` answers: `{"allowed": true, "countdown"}` with 200
/// when the cooldown started; `{"allowed": false, "remaining_ms", "ends_at", "countdown"}` with
/// 429 while it runs.
struct CooldownJSON: Encodable, Sendable {
    var outcome: CooldownOutcome

    enum CodingKeys: String, CodingKey {
        case allowed, countdown, remainingMs = "remaining_ms", endsAt = "ends_at"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(outcome.isAllowed, forKey: .allowed)
        if case .coolingDown(let remaining, let endsAt, _) = outcome {
            try container.encode(remaining.milliseconds, forKey: .remainingMs)
            try container.encode(endsAt.map(StoreTime.iso8601), forKey: .endsAt)
        }
        try container.encode(outcome.countdown, forKey: .countdown)
    }

    /// `Retry-After` for a cooldown with `remaining` left: whole seconds, rounded up, at least 1.
    static func retryAfter(_ remaining: Duration) -> Int64 {
        let ms = max(0, remaining.milliseconds)
        return max(1, ms / 1000 + (ms % 1000 == 0 ? 0 : 1))
    }
}

/// One page of `GET api/countdowns`.
struct PageJSON: Encodable, Sendable {
    var items: [Countdown]
    /// The cursor of the next page, or `null`.
    var next: String?
    /// The store wall clock at which the items' figures were computed, ISO-8601 and in ms.
    var now: String
    var nowMs: Int64

    enum CodingKeys: String, CodingKey {
        case items, next, now
        case nowMs = "now_ms"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(items, forKey: .items)
        try container.encode(next, forKey: .next)
        try container.encode(now, forKey: .now)
        try container.encode(nowMs, forKey: .nowMs)
    }
}

/// An event as the API and the stream give it: every field of the event, `null` when absent.
struct EventJSON: Encodable, Sendable {
    var event: CountdownEvent

    enum CodingKeys: String, CodingKey {
        case id, event, key, group, generation, payload, detail
        case recordedAt = "recorded_at", deadlineAt = "deadline_at", firedAt = "fired_at", lateMs = "late_ms"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(event.id, forKey: .id)
        try container.encode(event.kind.rawValue, forKey: .event)
        try container.encode(event.key, forKey: .key)
        try container.encode(event.group, forKey: .group)
        try container.encode(event.generation, forKey: .generation)
        try container.encode(StoreTime.iso8601(event.recordedAt), forKey: .recordedAt)
        try container.encode(event.deadlineAt.map(StoreTime.iso8601), forKey: .deadlineAt)
        try container.encode(event.firedAt.map(StoreTime.iso8601), forKey: .firedAt)
        try container.encode(event.lateMs, forKey: .lateMs)
        try container.encode(event.payload?.jsonText, forKey: .payload)
        try container.encode(event.detail, forKey: .detail)
    }
}

/// `GET api/countdowns/{key}/events`.
struct EventsJSON: Encodable, Sendable {
    var items: [EventJSON]
}

/// `GET api/status`: counts, clocks, the lease and the named consumers.
struct StatusJSON: Encodable, Sendable {
    struct Counts: Encodable, Sendable {
        var running = 0, paused = 0, expired = 0, cancelled = 0

        mutating func add(_ state: CountdownState, _ count: Int) {
            switch state {
            case .running: running += count
            case .paused: paused += count
            case .expired: expired += count
            case .cancelled: cancelled += count
            }
        }
    }

    struct Group: Encodable, Sendable {
        var group: String?
        var counts: Counts

        enum CodingKeys: String, CodingKey { case group, running, paused, expired, cancelled }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(group, forKey: .group)
            try container.encode(counts.running, forKey: .running)
            try container.encode(counts.paused, forKey: .paused)
            try container.encode(counts.expired, forKey: .expired)
            try container.encode(counts.cancelled, forKey: .cancelled)
        }
    }

    struct Clock: Encodable, Sendable {
        var wallMs: Int64, activeMs: Int64, gapMs: Int64
        var calibrationOffsetMs: Int64
        var calibratedAt: String?
        var skewMs: Int64
        var suspended: Bool
        var createdAt: String
        var lastHeartbeat: String

        enum CodingKeys: String, CodingKey {
            case wallMs = "wall_ms", activeMs = "active_ms", gapMs = "gap_ms"
            case calibrationOffsetMs = "calibration_offset_ms", calibratedAt = "calibrated_at", skewMs = "skew_ms"
            case suspended, createdAt = "created_at", lastHeartbeat = "last_heartbeat"
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(wallMs, forKey: .wallMs)
            try container.encode(activeMs, forKey: .activeMs)
            try container.encode(gapMs, forKey: .gapMs)
            try container.encode(calibrationOffsetMs, forKey: .calibrationOffsetMs)
            try container.encode(calibratedAt, forKey: .calibratedAt)
            try container.encode(skewMs, forKey: .skewMs)
            try container.encode(suspended, forKey: .suspended)
            try container.encode(createdAt, forKey: .createdAt)
            try container.encode(lastHeartbeat, forKey: .lastHeartbeat)
        }
    }

    struct Lease: Encodable, Sendable {
        var holder: String?
        var expiresAt: String?
        var thisServer: Bool

        enum CodingKeys: String, CodingKey { case holder, expiresAt = "expires_at", thisServer = "this_server" }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(holder, forKey: .holder)
            try container.encode(expiresAt, forKey: .expiresAt)
            try container.encode(thisServer, forKey: .thisServer)
        }
    }

    struct Consumer: Encodable, Sendable {
        var name: String
        var acknowledgedThrough: Int64
        var lag: Int64

        enum CodingKeys: String, CodingKey { case name, acknowledgedThrough = "acknowledged_through", lag }
    }

    /// The package's version (`CountdownStore.version`).
    var version = CountdownStore.version
    var now: String
    var nowMs: Int64
    var readOnly: Bool
    var counts: Counts
    var groups: [Group]
    var clock: Clock
    var lease: Lease
    var consumers: [Consumer]

    enum CodingKeys: String, CodingKey {
        case version, now, nowMs = "now_ms", readOnly = "read_only", counts, groups, clock, lease, consumers
    }

    init(
        counts: CountdownCounts, clock status: ClockStatus, consumers: [ConsumerStatus], instanceID: String,
        readOnly: Bool
    ) {
        let time = status.now
        now = StoreTime.iso8601(milliseconds: time.wall)
        nowMs = time.wall
        self.readOnly = readOnly
        var total = Counts()
        var byGroup: [String?: Counts] = [:]
        for entry in counts.entries {
            total.add(entry.state, entry.count)
            byGroup[entry.group, default: Counts()].add(entry.state, entry.count)
        }
        self.counts = total
        groups = byGroup.map { Group(group: $0.key, counts: $0.value) }.sorted { ($0.group ?? "") < ($1.group ?? "") }
        clock = Clock(
            wallMs: time.wall, activeMs: time.active, gapMs: time.gap,
            calibrationOffsetMs: status.calibrationOffset.milliseconds,
            calibratedAt: status.calibratedAt.map(StoreTime.iso8601),
            skewMs: status.clockSkew.milliseconds, suspended: status.suspended,
            createdAt: StoreTime.iso8601(status.createdAt), lastHeartbeat: StoreTime.iso8601(status.lastHeartbeat))
        lease = Lease(
            holder: status.leaseHolder, expiresAt: status.leaseExpiresAt.map(StoreTime.iso8601),
            thisServer: status.leaseHolder == instanceID)
        self.consumers = consumers.map {
            Consumer(name: $0.name, acknowledgedThrough: $0.acknowledgedThrough, lag: $0.lag)
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(version, forKey: .version)
        try container.encode(now, forKey: .now)
        try container.encode(nowMs, forKey: .nowMs)
        try container.encode(readOnly, forKey: .readOnly)
        try container.encode(counts, forKey: .counts)
        try container.encode(groups, forKey: .groups)
        try container.encode(clock, forKey: .clock)
        try container.encode(lease, forKey: .lease)
        try container.encode(consumers, forKey: .consumers)
    }
}

/// `{"error": {"code", "message"}}`.
struct ErrorJSON: Encodable, Sendable {
    struct Body: Encodable, Sendable {
        var code: String
        var message: String
    }

    var error: Body
}
