import Foundation

/// Something that happened in a store, as recorded in its `countdown_events` table.
public struct CountdownEvent: Sendable, Hashable, Identifiable {
    /// What kind of thing happened: an open set of names, as stored in the `kind` column.
    public struct Kind: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
        /// The name stored in the `kind` column.
        public let rawValue: String
        /// Creates a kind from its stored name.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The stored name.
        public var description: String { rawValue }

        /// A countdown started.
        public static let started = Kind(rawValue: "started")
        /// A stopwatch started.
        public static let stopwatchStarted = Kind(rawValue: "stopwatch_started")
        /// An active item was started again under its key, in a new generation.
        public static let replaced = Kind(rawValue: "replaced")
        /// An item was paused.
        public static let paused = Kind(rawValue: "paused")
        /// An item was resumed.
        public static let resumed = Kind(rawValue: "resumed")
        /// An item was cancelled.
        public static let cancelled = Kind(rawValue: "cancelled")
        /// An item restarted from zero, in a new generation.
        public static let restarted = Kind(rawValue: "restarted")
        /// A countdown's duration grew, in a new generation.
        public static let extended = Kind(rawValue: "extended")
        /// A countdown's duration shrank, in a new generation.
        public static let shortened = Kind(rawValue: "shortened")
        /// A debounced countdown's deadline moved later, in the same generation: a call of its
        /// burst (detail: its new `duration_ms` and `by_ms`).
        public static let postponed = Kind(rawValue: "postponed")
        /// A countdown reached zero: carries deadline, firing instant, lateness and payload.
        public static let expired = Kind(rawValue: "expired")
        /// An item was removed.
        public static let removed = Kind(rawValue: "removed")
        /// The host went to the background.
        public static let hostSuspended = Kind(rawValue: "host_suspended")
        /// The host came back.
        public static let hostResumed = Kind(rawValue: "host_resumed")
        /// The store was calibrated against a trusted time.
        public static let calibrated = Kind(rawValue: "calibrated")
        /// The system clock was found to disagree with the store clock (someone set it).
        public static let clockEdited = Kind(rawValue: "clock_edited")
        /// Old items and events were pruned.
        public static let pruned = Kind(rawValue: "pruned")
        /// A named consumer unread for longer than ``CountdownStore/Retention/staleConsumer``
        /// stopped holding retention back: events it has not read may be deleted. The detail
        /// names it (`consumer`), with its cursor (`cursor`) and when it last moved (`unread_since_ms`).
        public static let consumerStale = Kind(rawValue: "consumer_stale")
    }

    /// The event's position in the store's history: increasing, never reused.
    public var id: Int64
    /// What happened.
    public var kind: Kind
    /// The item's key, for item events.
    public var key: String?
    /// The item's group, if any.
    public var group: String?
    /// The item's generation the event belongs to.
    public var generation: Int64?
    /// When the event was recorded, on the store wall clock.
    public var recordedAt: Date
    /// For an expiry: when the countdown came due, on the store wall clock.
    public var deadlineAt: Date?
    /// For an expiry: when it was marked expired.
    public var firedAt: Date?
    /// For an expiry: how late the firing was, on the item's own timeline.
    public var late: Duration?
    /// For an expiry: the item's payload.
    public var payload: CountdownPayload?
    /// Figures specific to the kind, as a JSON object (for example `{"skew_ms":3600000}`).
    public var detail: String?
    /// The reader of a named consumer that was given the event (`nil` for any other stream): its
    /// acknowledgement counts only while that reader holds the claim on it. Not part of the
    /// event's identity: the same event compares equal wherever it was read.
    var claimant: String?

    /// Whether two values describe the same event with the same contents.
    public static func == (lhs: CountdownEvent, rhs: CountdownEvent) -> Bool {
        lhs.id == rhs.id && lhs.kind == rhs.kind && lhs.key == rhs.key && lhs.group == rhs.group
            && lhs.generation == rhs.generation && lhs.recordedAt == rhs.recordedAt && lhs.deadlineAt == rhs.deadlineAt
            && lhs.firedAt == rhs.firedAt && lhs.late == rhs.late && lhs.payload == rhs.payload
            && lhs.detail == rhs.detail
    }

    /// Hashes the event's id and contents (not the reader it was given to).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(kind)
        hasher.combine(key)
        hasher.combine(generation)
        hasher.combine(recordedAt)
    }

    init(_ record: EventRecord) {
        id = record.id ?? 0
        kind = Kind(rawValue: record.kind)
        key = record.key
        group = record.group
        generation = record.generation
        recordedAt = Date(millisecondsSince1970: record.atMs)
        deadlineAt = record.deadlineAtMs.map(Date.init(millisecondsSince1970:))
        firedAt = record.firedAtMs.map(Date.init(millisecondsSince1970:))
        late = record.lateMs.map(Duration.init(ms:))
        payload = record.payload
        detail = record.detail
    }
}

/// Which events a stream delivers. Every criterion left `nil` matches everything.
public struct EventFilter: Sendable, Hashable {
    /// Only these kinds.
    public var kinds: Set<CountdownEvent.Kind>?
    /// Only events of items in this group.
    public var group: String?
    /// Only events of the item with this key.
    public var key: String?

    /// A filter on kinds, group and key.
    public init(kinds: Set<CountdownEvent.Kind>? = nil, group: String? = nil, key: String? = nil) {
        self.kinds = kinds
        self.group = group
        self.key = key
    }

    /// Every event.
    public static let all = EventFilter()
    /// Expiries only.
    public static let expiries = EventFilter(kinds: [.expired])

    func matches(_ record: EventRecord) -> Bool {
        (kinds?.contains(CountdownEvent.Kind(rawValue: record.kind)) ?? true)
            && (group == nil || record.group == group)
            && (key == nil || record.key == key)
    }

    /// Whether a reader reads through the indexes by kind and by group: a filter on kinds or a group.
    var readsByIndex: Bool { kinds != nil || group != nil }

    /// The kinds as the store writes them, sorted; every kind for a filter on a group alone.
    var kindNames: [String]? {
        if let kinds { return kinds.map(\.rawValue).sorted() }
        return group == nil ? nil : EventKind.allCases.map(\.rawValue)
    }

    func validated() throws(CountdownError) -> EventFilter {
        EventFilter(
            kinds: kinds, group: try Validate.group(group),
            key: try key.map { (key) throws(CountdownError) in try Validate.key(key) })
    }
}
