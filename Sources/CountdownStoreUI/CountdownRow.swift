import CountdownStore
import Foundation

/// One countdown or stopwatch as a screen shows it: its figures, and what SwiftUI's
/// `Text(timerInterval:pauseTime:countsDown:showsHours:)` needs to count its label down (or up)
/// by itself, with no update per second.
///
/// ``timerInterval`` and ``pauseTime`` are instants on the device's clock (the system clock, as
/// `Date()` reads it), translated from the store clock with the store's calibration and skew, so
/// a label counts right even when the store clock has been calibrated to a server's time.
public struct CountdownRow: Identifiable, Sendable, Hashable {
    /// The item with its figures, as the store computed them.
    public var item: Countdown
    /// Whether the figures change with time right now: a running item whose time counts (a
    /// `wall` one always, an `active` one while a ticker runs and the app is not suspended).
    public var isCounting: Bool
    /// The instant on the device's clock at which ``item``'s figures hold.
    public var deviceTime: Date

    /// The key: a row's identity.
    public var id: String { item.key }
    /// The item's key.
    public var key: String { item.key }
    /// The item's group.
    public var group: String? { item.group }
    /// Running, paused, expired or cancelled.
    public var state: CountdownState { item.state }
    /// Time left, for a countdown; `nil` for a stopwatch.
    public var remaining: Duration? { item.remaining }
    /// Time counted so far.
    public var elapsed: Duration { item.elapsed }

    /// Creates the row of `item`, whose figures hold at `deviceTime` on the device's clock.
    public init(item: Countdown, isCounting: Bool, deviceTime: Date) {
        self.item = item
        self.isCounting = isCounting
        self.deviceTime = deviceTime
    }

    /// Whether a label counts down (a countdown) rather than up (a stopwatch).
    public var countsDown: Bool { item.kind == .countdown }

    /// Whether a label drawn from the figures (rather than by `Text(timerInterval:)`) must be
    /// redrawn on beats: only while the item counts.
    public var needsBeat: Bool { isCounting }

    /// The interval for `Text(timerInterval:)`, on the device's clock: from the instant the item
    /// would have started had it never paused, to the instant a countdown reaches zero (for a
    /// stopwatch, `Date.distantFuture`). Its upper bound minus ``deviceTime`` is ``remaining``.
    public var timerInterval: ClosedRange<Date> {
        let start = deviceTime.addingTimeInterval(-Self.seconds(item.elapsed))
        guard let remaining = item.remaining else { return start...Date.distantFuture }
        return start...deviceTime.addingTimeInterval(Self.seconds(remaining))
    }

    /// The instant a label stands still at (``deviceTime``) when the item does not count, else `nil`.
    public var pauseTime: Date? { isCounting ? nil : deviceTime }

    /// Whether a label needs hours: the item's duration or elapsed time is an hour or more.
    public var showsHours: Bool { max(item.duration ?? .zero, item.elapsed) >= .seconds(3600) }

    /// How much of a countdown has gone, from 0 to 1; `nil` for a stopwatch.
    public var progress: Double? {
        guard let duration = item.duration, duration > .zero else { return nil }
        return min(1, max(0, Self.seconds(item.elapsed) / Self.seconds(duration)))
    }

    /// The remaining time of a countdown or the elapsed time of a stopwatch, as the tool prints
    /// it (`14m59s`, `1h`, `250ms`).
    public var figureText: String { DurationText.format(item.remaining ?? item.elapsed) }

    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
