import Foundation

/// Whether an item counts down to zero or up from zero.
public enum CountdownKind: String, Sendable, Hashable, Codable, CaseIterable {
    /// Counts down from a duration and expires at zero.
    case countdown
    /// Counts up from zero and never expires; reports elapsed time only.
    case stopwatch
}

/// The rule a countdown was started under, on top of counting down: how calls on its key while
/// it is active behave.
public enum CountdownRule: String, Sendable, Hashable, Codable, CaseIterable {
    /// Started by ``CountdownStore/cooldown(_:duration:group:policy:payload:)``: while it runs,
    /// the key's next cooldown is refused with the time left.
    case cooldown
    /// Started by ``CountdownStore/debounce(_:quiet:maxWait:group:policy:payload:)``: each call
    /// while it is active moves its deadline later, never past its maximum wait.
    case debounce
}

/// Which time an item counts.
public enum CountdownPolicy: String, Sendable, Hashable, Codable, CaseIterable {
    /// Keeps counting while the host is suspended or not running (payment deadlines, cooldowns).
    /// The default.
    case wall
    /// Counts only while a host runs the store's ticker (time on screen, foreground-only timers).
    case active
}

/// Where an item is in its life.
public enum CountdownState: String, Sendable, Hashable, Codable, CaseIterable {
    /// Counting.
    case running
    /// Stopped for now; paused time never counts.
    case paused
    /// Reached zero.
    case expired
    /// Stopped for good before reaching zero.
    case cancelled

    /// Running or paused.
    public var isActive: Bool { self == .running || self == .paused }
}

/// Text or bytes a caller attaches to an item and gets back with it and with its expiry.
public enum CountdownPayload: Sendable, Hashable, Codable {
    /// UTF-8 text.
    case text(String)
    /// Raw bytes.
    case bytes(Data)

    /// The largest payload accepted: 64 KiB.
    public static let maximumBytes = 65_536

    /// The payload's size in bytes.
    public var byteCount: Int {
        switch self {
        case .text(let text): text.utf8.count
        case .bytes(let data): data.count
        }
    }
}

/// One countdown or stopwatch, with its figures computed at one instant.
public struct Countdown: Sendable, Hashable, Identifiable {
    /// The caller's unique identifier of the item (Unicode NFC).
    public var key: String
    /// The item's group, if any.
    public var group: String?
    /// Countdown or stopwatch.
    public var kind: CountdownKind
    /// Which time the item counts.
    public var policy: CountdownPolicy
    /// Running, paused, expired or cancelled. A countdown is expired from the instant its
    /// remaining time reaches zero, for every reader, whether or not its expiry is recorded yet.
    public var state: CountdownState
    /// The total duration of a countdown; `nil` for a stopwatch.
    public var duration: Duration?
    /// Time counted so far, paused time excluded; at most ``duration`` for a countdown.
    public var elapsed: Duration
    /// Time left before a countdown expires (zero once due); `nil` for a stopwatch.
    public var remaining: Duration?
    /// When the item (re)started, on the store wall clock.
    public var startedAt: Date
    /// When a countdown reaches zero, on the store wall clock: for a running one, if nothing
    /// changes (an `active` one has none while no ticker holds the store: it does not count down
    /// meanwhile); for an expired one, the instant it reached zero. `nil` while paused, once
    /// cancelled, and for a stopwatch.
    public var deadlineAt: Date?
    /// The instant the countdown's remaining time reached zero, on the store wall clock, whether
    /// or not its expiry was recorded yet; `nil` unless expired.
    public var expiredAt: Date?
    /// Bumped by every restart, extend, shorten and replace; events name the generation they belong to.
    public var generation: Int64
    /// The caller's payload, if any.
    public var payload: CountdownPayload?
    /// The store clocks at the instant these figures were computed.
    public var computedAt: StoreTime
    /// The rule the countdown was started under (a cooldown or a debounce); `nil` for a plain
    /// countdown or a stopwatch.
    public var rule: CountdownRule? = nil
    /// A debounced countdown's maximum wait: its duration never grows past it, so it expires at
    /// most this long after the first call of its burst (on its own timeline, paused time apart).
    public var maxWait: Duration? = nil
    /// When a running debounced countdown reaches its maximum wait (``maxWait`` after it started,
    /// moved later by any pause): its deadline never passes this instant. `nil` otherwise, and
    /// for an `active` countdown while no ticker runs.
    public var boundAt: Date? = nil

    /// The key.
    public var id: String { key }

    /// Whether the item is running or paused.
    public var isActive: Bool { state.isActive }
}

extension Duration {
    /// A duration of whole milliseconds.
    init(ms: Int64) {
        self = .milliseconds(ms)
    }
}
