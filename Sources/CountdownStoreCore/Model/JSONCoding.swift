import Foundation

// `Codable` for the two values a host most often returns from an API: a plain `JSONEncoder()`
// gives exactly the objects the `countdown` tool prints (`show --json` and `run`'s lines): the
// same field names, instants as ISO-8601 UTC text with milliseconds, durations as integer
// milliseconds, the payload as the tool prints it (text as it is, bytes as base64).

extension Countdown {
    /// The total duration in whole milliseconds; `nil` for a stopwatch.
    public var durationMs: Int64? { duration?.milliseconds }
    /// The elapsed time in whole milliseconds.
    public var elapsedMs: Int64 { elapsed.milliseconds }
    /// The remaining time in whole milliseconds; `nil` for a stopwatch.
    public var remainingMs: Int64? { remaining?.milliseconds }
}

extension CountdownEvent {
    /// The lateness of an expiry in whole milliseconds; `nil` for other events.
    public var lateMs: Int64? { late?.milliseconds }
}

extension Countdown: Codable {
    private enum CodingKeys: String, CodingKey {
        case key, group, kind, policy, state
        case durationMs = "duration_ms", elapsedMs = "elapsed_ms", remainingMs = "remaining_ms"
        case startedAt = "started_at", deadlineAt = "deadline_at", expiredAt = "expired_at"
        case generation, payload, rule
        case maxWaitMs = "max_wait_ms", boundAt = "bound_at"
    }

    /// Encodes the object of `countdown show --json`, every field present (`null` when absent).
    /// ``computedAt`` is not part of it.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(key, forKey: .key)
        try container.encode(group, forKey: .group)
        try container.encode(kind, forKey: .kind)
        try container.encode(policy, forKey: .policy)
        try container.encode(state, forKey: .state)
        try container.encode(durationMs, forKey: .durationMs)
        try container.encode(elapsedMs, forKey: .elapsedMs)
        try container.encode(remainingMs, forKey: .remainingMs)
        try container.encode(StoreTime.iso8601(startedAt), forKey: .startedAt)
        try container.encode(deadlineAt.map(StoreTime.iso8601), forKey: .deadlineAt)
        try container.encode(expiredAt.map(StoreTime.iso8601), forKey: .expiredAt)
        try container.encode(generation, forKey: .generation)
        try container.encode(payload?.jsonText, forKey: .payload)
        try container.encode(rule, forKey: .rule)
        try container.encode(maxWait?.milliseconds, forKey: .maxWaitMs)
        try container.encode(boundAt.map(StoreTime.iso8601), forKey: .boundAt)
    }

    /// Decodes that object. A payload comes back as text (bytes were printed as base64), and
    /// ``computedAt`` as zero on every clock: the figures are those of the instant they were encoded.
    /// An object without `rule`, `max_wait_ms` and `bound_at` (as printed before they were added)
    /// decodes as a plain countdown.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            key: try container.decode(String.self, forKey: .key),
            group: try container.decodeIfPresent(String.self, forKey: .group),
            kind: try container.decode(CountdownKind.self, forKey: .kind),
            policy: try container.decode(CountdownPolicy.self, forKey: .policy),
            state: try container.decode(CountdownState.self, forKey: .state),
            duration: try container.decodeIfPresent(Int64.self, forKey: .durationMs).map(Duration.init(ms:)),
            elapsed: Duration(ms: try container.decode(Int64.self, forKey: .elapsedMs)),
            remaining: try container.decodeIfPresent(Int64.self, forKey: .remainingMs).map(Duration.init(ms:)),
            startedAt: try container.decodeInstant(forKey: .startedAt),
            deadlineAt: try container.decodeInstantIfPresent(forKey: .deadlineAt),
            expiredAt: try container.decodeInstantIfPresent(forKey: .expiredAt),
            generation: try container.decode(Int64.self, forKey: .generation),
            payload: try container.decodeIfPresent(String.self, forKey: .payload).map(CountdownPayload.text),
            computedAt: StoreTime(wall: 0, active: 0, gap: 0),
            rule: try container.decodeIfPresent(CountdownRule.self, forKey: .rule),
            maxWait: try container.decodeIfPresent(Int64.self, forKey: .maxWaitMs).map(Duration.init(ms:)),
            boundAt: try container.decodeInstantIfPresent(forKey: .boundAt))
    }
}

extension CountdownEvent: Codable {
    private enum CodingKeys: String, CodingKey {
        case event, key, group, generation
        case deadlineAt = "deadline_at", firedAt = "fired_at", lateMs = "late_ms"
        case payload
    }

    /// Encodes a line of `countdown run`: `event` (the kind), `key`, `group`, `generation`,
    /// `deadline_at`, `fired_at`, `late_ms` and `payload`, every field present. The event's
    /// ``id``, ``recordedAt`` and ``detail`` are not part of it.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(kind.rawValue, forKey: .event)
        try container.encode(key, forKey: .key)
        try container.encode(group, forKey: .group)
        try container.encode(generation, forKey: .generation)
        try container.encode(deadlineAt.map(StoreTime.iso8601), forKey: .deadlineAt)
        try container.encode(firedAt.map(StoreTime.iso8601), forKey: .firedAt)
        try container.encode(lateMs, forKey: .lateMs)
        try container.encode(payload?.jsonText, forKey: .payload)
    }

    /// Decodes such a line: ``id`` is 0, ``recordedAt`` is `fired_at` (else `deadline_at`, else
    /// 1970), ``detail`` is `nil`, and a payload comes back as text.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let firedAt = try container.decodeInstantIfPresent(forKey: .firedAt)
        let deadlineAt = try container.decodeInstantIfPresent(forKey: .deadlineAt)
        id = 0
        kind = Kind(rawValue: try container.decode(String.self, forKey: .event))
        key = try container.decodeIfPresent(String.self, forKey: .key)
        group = try container.decodeIfPresent(String.self, forKey: .group)
        generation = try container.decodeIfPresent(Int64.self, forKey: .generation)
        recordedAt = firedAt ?? deadlineAt ?? Date(timeIntervalSince1970: 0)
        self.deadlineAt = deadlineAt
        self.firedAt = firedAt
        late = try container.decodeIfPresent(Int64.self, forKey: .lateMs).map(Duration.init(ms:))
        payload = try container.decodeIfPresent(String.self, forKey: .payload).map(CountdownPayload.text)
        detail = nil
    }
}

extension CountdownPayload {
    /// The payload as the `countdown` tool prints it: text as it is, bytes as base64.
    public var jsonText: String {
        switch self {
        case .text(let text): text
        case .bytes(let data): data.base64EncodedString()
        }
    }
}

extension KeyedDecodingContainer {
    /// An ISO-8601 instant, with or without milliseconds.
    fileprivate func decodeInstant(forKey key: Key) throws -> Date {
        let text = try decode(String.self, forKey: key)
        guard let date = Self.parseISO8601(text) else {
            throw DecodingError.dataCorruptedError(
                forKey: key, in: self, debugDescription: "invalid ISO-8601 instant '\(text)'")
        }
        return date
    }

    fileprivate func decodeInstantIfPresent(forKey key: Key) throws -> Date? {
        try !contains(key) || decodeNil(forKey: key) ? nil : decodeInstant(forKey: key)
    }

    private static func parseISO8601(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }
}
