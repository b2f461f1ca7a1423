import Foundation

/// The store's three clocks at one instant (SPEC section 3), in milliseconds.
///
/// - ``wall`` (W): UTC epoch ms as the store believes it: the system clock plus the calibration
///   offset, advanced by the boot clock inside one boot, never backwards.
/// - ``active`` (A): ms during which a host held the store with its ticker running, not suspended.
/// - ``gap`` (G): ms the host spent suspended or not running at all, since the store was created.
///
/// A `wall` item runs on `A + G`, an `active` item on `A` alone.
public struct StoreTime: Sendable, Hashable, Codable {
    /// The store wall clock W, UTC epoch milliseconds.
    public var wall: Int64
    /// The active timeline A, milliseconds.
    public var active: Int64
    /// The cumulative background gap G, milliseconds.
    public var gap: Int64

    /// Creates a reading of the three clocks.
    public init(wall: Int64, active: Int64, gap: Int64) {
        self.wall = wall
        self.active = active
        self.gap = gap
    }

    /// W as a `Date`.
    public var wallDate: Date { Date(millisecondsSince1970: wall) }

    /// An instant of whole milliseconds as ISO-8601 UTC text, `2026-11-21T08:33:16.123Z`: the
    /// form the views and the `countdown` tool use, computed from the integer, so exact.
    public static func iso8601(milliseconds: Int64) -> String {
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let fraction = milliseconds - seconds * 1000
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        guard (0...9999).contains(year) else {
            return String(
                format: "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%03lldZ", year, month, day,
                secondOfDay / 3600, secondOfDay / 60 % 60, secondOfDay % 60, fraction)
        }
        // The usual years without `String(format:)`, which costs more than the rest of an
        // expiry's line in `countdown run`'s output.
        let fields: [(value: Int64, digits: Int64, then: UInt8)] = [
            (year, 1000, UInt8(ascii: "-")), (month, 10, UInt8(ascii: "-")), (day, 10, UInt8(ascii: "T")),
            (secondOfDay / 3600, 10, UInt8(ascii: ":")), (secondOfDay / 60 % 60, 10, UInt8(ascii: ":")),
            (secondOfDay % 60, 10, UInt8(ascii: ".")), (fraction, 100, UInt8(ascii: "Z")),
        ]
        return String(unsafeUninitializedCapacity: 24) { buffer in
            var index = 0
            for field in fields {
                var divisor = field.digits
                while divisor > 0 {
                    buffer[index] = UInt8(48 + field.value / divisor % 10)
                    divisor /= 10
                    index += 1
                }
                buffer[index] = field.then
                index += 1
            }
            return index
        }
    }

    /// A `Date` as ISO-8601 UTC text with milliseconds; see ``iso8601(milliseconds:)``.
    public static func iso8601(_ date: Date) -> String {
        iso8601(milliseconds: date.millisecondsSince1970)
    }

    /// The item timeline of `policy` at this instant: `A + G` for `wall`, `A` for `active`.
    public func timeline(_ policy: CountdownPolicy) -> Int64 {
        switch policy {
        case .wall: active + gap
        case .active: active
        }
    }

    /// This reading, raised where needed so that neither W nor an item timeline (`A + G`, `A`)
    /// reads below `floor`: the in-process guarantee that no remaining time ever grows back.
    ///
    /// `A + G` is raised only as far as the floor's, so a raised `A` comes out of `G`. `G` alone
    /// may read below the floor's: an earlier reading may have counted as background gap time
    /// that the lease holder's checkpoint, committed meanwhile, counted as active. Raising `G`
    /// too would push `A + G` ahead of W and place the deadlines of `wall` items early.
    func notBelow(_ floor: StoreTime) -> StoreTime {
        let wall = max(self.wall, floor.wall)
        let active = max(self.active, floor.active)
        let total = max(self.active + self.gap, floor.active + floor.gap)
        return StoreTime(wall: wall, active: active, gap: total - active)
    }
}

extension Date {
    /// The instant `milliseconds` after 1970-01-01T00:00:00Z.
    package init(millisecondsSince1970 milliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    /// Milliseconds since 1970, rounded to the nearest; nil for an instant beyond ±100,000 years or not finite.
    var checkedMillisecondsSince1970: Int64? {
        let ms = (timeIntervalSince1970 * 1000).rounded()
        guard ms.isFinite, abs(ms) < 3.2e15 else { return nil }
        return Int64(ms)
    }

    /// Milliseconds since 1970, rounded to the nearest (saturating for instants out of range).
    package var millisecondsSince1970: Int64 {
        checkedMillisecondsSince1970 ?? (timeIntervalSince1970 < 0 ? -3_200_000_000_000_000 : 3_200_000_000_000_000)
    }

    /// The instant for an error message: ISO-8601 when representable, else its raw seconds since 1970.
    var described: String {
        guard checkedMillisecondsSince1970 != nil else { return "\(timeIntervalSince1970) s since 1970" }
        return StoreTime.iso8601(self)
    }
}

/// The clocks at one instant, as the item formulas read them: ``StoreTime`` or ``Now``.
package protocol ClockInstant: Sendable {
    /// W.
    var wall: Int64 { get }
    /// A.
    var active: Int64 { get }
    /// G.
    var gap: Int64 { get }
    /// The item timeline of `policy`.
    func timeline(_ policy: CountdownPolicy) -> Int64
}

extension StoreTime: ClockInstant {}
extension Now: ClockInstant {}

/// One reading of a ``StoreClock``.
package struct ClockReading: Sendable, Hashable {
    package var system: Int64
    package var boot: Int64
    package var bootID: String?
    /// How far `system` may be from the clock it reads at `boot`, in ms: 0 for the host's own
    /// clock; half the round trip of the statement that read a database server's clock.
    package var uncertainty: Int64

    package init(system: Int64, boot: Int64, bootID: String?, uncertainty: Int64 = 0) {
        self.system = system
        self.boot = boot
        self.bootID = bootID
        self.uncertainty = uncertainty
    }

    package init(_ clock: any StoreClock) {
        self.init(system: clock.systemMilliseconds, boot: clock.bootMilliseconds, bootID: clock.bootIdentity)
    }
}

/// The `countdown_clock` row: the store's clocks at the last checkpoint.
///
/// Every process extrapolates the clocks from it the same way (and the `countdown_now` view
/// does too, with the system clock alone), so there is one time model, not one per process.
package struct Checkpoint: Sendable, Hashable {
    package var createdAt: Int64
    package var active: Int64
    package var gap: Int64
    package var heartbeatAt: Int64
    package var heartbeatBoot: Int64
    package var bootID: String?
    package var wallFloor: Int64
    package var suspended: Bool
    package var calibrationOffset: Int64
    package var calibratedAt: Int64?
    package var clockSkew: Int64

    /// The checkpoint of a store created now.
    package static func initial(at reading: ClockReading) -> Checkpoint {
        Checkpoint(
            createdAt: reading.system, active: 0, gap: 0,
            heartbeatAt: reading.system, heartbeatBoot: reading.boot, bootID: reading.bootID,
            wallFloor: reading.system, suspended: false, calibrationOffset: 0, calibratedAt: nil, clockSkew: 0)
    }

    /// The store's clocks at `reading`, extrapolated from this checkpoint.
    ///
    /// - Within the boot of the checkpoint, time since it is measured by the boot clock alone,
    ///   so edits of the system clock move nothing.
    /// - Across a reboot only the wall clock exists: it is trusted, but W never goes backwards.
    /// - Time since the checkpoint is active while a live lease holder ticks and the host is not
    ///   suspended; otherwise it is background gap (`leaseExpiresAt` is the lease's expiry in W).
    func extrapolate(to reading: ClockReading, leaseExpiresAt: Int64) -> Extrapolation {
        let sameBoot = bootID != nil && bootID == reading.bootID && reading.boot >= heartbeatBoot
        let trustedWall = reading.system &+ calibrationOffset
        let delta = sameBoot ? reading.boot - heartbeatBoot : max(0, trustedWall &- heartbeatAt)
        let unflooredWall = heartbeatAt + delta
        let ticking = !suspended && leaseExpiresAt > unflooredWall
        let time = StoreTime(
            wall: wall(after: delta),
            active: active + (ticking ? delta : 0),
            gap: gap + (ticking ? 0 : delta))
        return Extrapolation(time: time, unflooredWall: unflooredWall, ticking: ticking, sameBoot: sameBoot,
                             skew: trustedWall &- unflooredWall, skewUncertainty: reading.uncertainty)
    }

    /// W when `delta` ms have passed since this checkpoint.
    ///
    /// Normally the checkpoint's W plus `delta`. While W is ahead of the trusted time (after a
    /// calibration to an earlier time, forced), W never goes back: it advances at half speed from
    /// its floor until the trusted time catches up, so instants stay distinct and ordered. The
    /// same formula is written in SQL in the `countdown_now` view.
    func wall(after delta: Int64) -> Int64 {
        max(heartbeatAt + delta, wallFloor + delta / 2)
    }

    /// The item timeline of `policy` at this checkpoint: `A + G` for `wall`, `A` for `active`.
    func timeline(_ policy: CountdownPolicy) -> Int64 {
        policy == .wall ? active + gap : active
    }

    /// Whether this checkpoint, a move from `base`, places every expiry still to record (the
    /// soonest of each timeline in `backlog`) at the instant `base` placed it.
    ///
    /// An expiry due before a checkpoint is placed backwards from it, at
    /// `heartbeatAt − (timeline − deadline)`; one due after, forwards, the same way unless the
    /// checkpoint slews (W at half speed, see ``wall(after:)``). So the instants stay where they
    /// were when `base` did not slew and `heartbeatAt − timeline` is the same for each timeline
    /// that has an expiry to record: every move while a host ticks, and for `wall` countdowns any
    /// move but a calibration.
    func keepsPlacement(of backlog: SoonestDeadlines, from base: Checkpoint) -> Bool {
        guard base.wallFloor <= base.heartbeatAt else { return false }
        return CountdownPolicy.allCases.allSatisfy { policy in
            backlog[policy] == nil || heartbeatAt - timeline(policy) == base.heartbeatAt - base.timeline(policy)
        }
    }

    /// This checkpoint moved to `time`, taken at `reading`.
    func advanced(to time: StoreTime, unflooredWall: Int64, at reading: ClockReading) -> Checkpoint {
        var next = self
        next.active = time.active
        next.gap = time.gap
        next.heartbeatAt = unflooredWall
        next.heartbeatBoot = reading.boot
        next.bootID = reading.bootID
        next.wallFloor = max(wallFloor, time.wall)
        return next
    }

    /// A checkpoint with every column given.
    package init(createdAt: Int64, active: Int64, gap: Int64, heartbeatAt: Int64, heartbeatBoot: Int64, bootID: String?, wallFloor: Int64, suspended: Bool, calibrationOffset: Int64, calibratedAt: Int64?, clockSkew: Int64) {
        self.createdAt = createdAt
        self.active = active
        self.gap = gap
        self.heartbeatAt = heartbeatAt
        self.heartbeatBoot = heartbeatBoot
        self.bootID = bootID
        self.wallFloor = wallFloor
        self.suspended = suspended
        self.calibrationOffset = calibrationOffset
        self.calibratedAt = calibratedAt
        self.clockSkew = clockSkew
    }
}

/// The outcome of extrapolating a checkpoint to a reading.
struct Extrapolation: Sendable, Hashable {
    /// The three clocks now.
    var time: StoreTime
    /// W before the floor is applied: the base of the next checkpoint.
    var unflooredWall: Int64
    /// Whether time since the checkpoint counted as active.
    var ticking: Bool
    /// Whether the checkpoint was taken in this boot.
    var sameBoot: Bool
    /// (system clock + calibration offset) − W: how far the system clock disagrees with the store.
    var skew: Int64
    /// How far `skew` may be off: the reading's uncertainty.
    var skewUncertainty: Int64 = 0
}

/// The store's clocks at one instant, with the checkpoint they were extrapolated from, so that an
/// instant on an item's own timeline can be placed on the store wall clock.
///
/// Between two checkpoints the clocks run in step: W and the `wall` timeline advance together
/// (W at half speed while it slews, see ``Checkpoint/wall(after:)``), the `active` timeline only
/// while a live lease holder ticks. A checkpoint moves only in ways that keep the instant at which
/// each countdown due but not yet recorded reached zero (``Checkpoint/keepsPlacement(of:from:)``):
/// that instant follows from the checkpoint alone, and every reader (the views too) computes the
/// same instant, which does not move.
struct Now: Sendable {
    /// The three clocks now.
    var clocks: StoreTime
    /// The checkpoint the clocks were extrapolated from.
    var base: Checkpoint
    /// Whether time since the checkpoint counts as active.
    var ticking: Bool

    /// Whether this write left the checkpoint behind because expiries still to record would
    /// have been placed elsewhere from the moved one (see ``Checkpoint/keepsPlacement(of:from:)``).
    var checkpointBehindBacklog = false

    /// Throws ``CheckpointBehindBacklog`` when this write left the checkpoint behind: for writes
    /// that change the checkpoint themselves (suspending, calibrating), which must start from now.
    func requireCheckpointAtNow() throws {
        if checkpointBehindBacklog { throw CheckpointBehindBacklog() }
    }

    init(_ clocks: StoreTime, base: Checkpoint, ticking: Bool) {
        self.clocks = clocks
        self.base = base
        self.ticking = ticking
    }

    /// W now.
    var wall: Int64 { clocks.wall }
    /// A now.
    var active: Int64 { clocks.active }
    /// G now.
    var gap: Int64 { clocks.gap }

    /// The item timeline of `policy` now.
    func timeline(_ policy: CountdownPolicy) -> Int64 { clocks.timeline(policy) }

    /// The instant on the store wall clock at which the `policy` timeline reads `value`; `nil`
    /// for an `active` timeline that stands still (nobody ticks) and has not reached it.
    ///
    /// An `active` timeline that stands still now may still have reached `value` since the
    /// checkpoint: this process read it while a lease holder ticked, before the lease ran out
    /// (its readings never go back). It got there while ticking, so it is placed as if ticking.
    func wall(when policy: CountdownPolicy, reaches value: Int64) -> Int64? {
        let sinceBase = value - (policy == .wall ? base.active + base.gap : base.active)
        if sinceBase < 0 { return base.heartbeatAt + sinceBase }  // before the checkpoint (a store written by an older version)
        if policy == .active && !ticking && value > clocks.active { return nil }
        return base.wall(after: sinceBase)
    }
}

/// Thrown inside a write whose body must change the checkpoint when the write could not move it
/// to now (expiries still to record): the store records them in batches and tries again. An
/// engine passes it through as it is.
package struct CheckpointBehindBacklog: Error {}
