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

extension StoreTime: ClockInstant {}
