import Foundation

/// Durations as people write them: `90s`, `15m`, `1h30m`, `2d`, `250ms`, ISO-8601 `PT15M`,
/// or plain seconds (`90`, `1.5`).
public enum DurationText {
    /// Parses `text` into a duration between 1 ms and 100 years.
    ///
    /// - Throws: ``CountdownError/Code/invalidDuration`` naming the text when it is not a duration,
    ///   is zero, negative, not finite, or out of range.
    public static func parse(_ text: String) throws(CountdownError) -> Duration {
        try parse(text, naming: "duration")
    }

    /// Parses `text` as ``parse(_:)`` does, naming it `what` in a refusal (`invalid quiet '0s': …`):
    /// for a duration given under a name of its own, as a field of a request.
    package static func parse(_ text: String, naming what: String) throws(CountdownError) -> Duration {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard let ms = milliseconds(of: trimmed) else {
            throw CountdownError(
                .invalidDuration,
                "invalid \(what) \(quoted(text)): "
                    + "expected a form like 90s, 15m, 1h30m, 2d, 250ms, PT15M or plain seconds"
            )
        }
        guard ms.rounded() >= Double(Validate.minimumDurationMs), ms.rounded() <= Double(Validate.maximumDurationMs)
        else {
            throw CountdownError(
                .invalidDuration, "invalid \(what) \(quoted(text)): must be between 1ms and 100 years")
        }
        return .milliseconds(Int64(ms.rounded()))
    }

    /// Formats a duration compactly for people: `1h30m`, `4m05s`, `12.3s`, `250ms`.
    public static func format(_ duration: Duration) -> String {
        format(milliseconds: duration.milliseconds)
    }

    /// Formats milliseconds compactly for people.
    static func format(milliseconds ms: Int64) -> String {
        if ms < 0 { return "-" + format(milliseconds: ms == .min ? .max : -ms) }
        if ms < 1000 { return "\(ms)ms" }
        let seconds = ms / 1000
        if seconds < 60 {
            let tenths = (ms % 1000) / 100
            return tenths == 0 ? "\(seconds)s" : "\(seconds).\(tenths)s"
        }
        let (days, hours, minutes, secs) = (seconds / 86_400, seconds / 3600 % 24, seconds / 60 % 60, seconds % 60)
        if days > 0 { return "\(days)d" + (hours > 0 ? "\(hours)h" : "") }
        if hours > 0 { return "\(hours)h" + (minutes > 0 ? String(format: "%02dm", minutes) : "") }
        return "\(minutes)m" + String(format: "%02ds", secs)
    }

    /// Milliseconds as a finite Double, or nil when the text is not a duration.
    private static func milliseconds(of text: String) -> Double? {
        guard !text.isEmpty else { return nil }
        if text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }) {
            guard let seconds = Double(text), seconds.isFinite else { return nil }
            return seconds * 1000
        }
        if text.first == "P" || text.first == "p" { return iso8601(text.uppercased()) }
        return units(text.lowercased())
    }

    /// `1h30m`, `2d`, `250ms`, `1.5h`: numbers each followed by a unit, units in decreasing order.
    private static func units(_ text: String) -> Double? {
        let scale: [(String, Double)] = [("d", 86_400_000), ("h", 3_600_000), ("ms", 1), ("m", 60_000), ("s", 1000)]
        let order = ["d", "h", "m", "s", "ms"]
        var total = 0.0
        var rest = Substring(text)
        var lastRank = -1
        while !rest.isEmpty {
            let number = rest.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
            guard !number.isEmpty, let value = Double(number), value.isFinite else { return nil }
            rest = rest.dropFirst(number.count)
            guard let (unit, factor) = scale.first(where: { rest.hasPrefix($0.0) }) else { return nil }
            let rank = order.firstIndex(of: unit)!
            guard rank > lastRank else { return nil }
            lastRank = rank
            rest = rest.dropFirst(unit.count)
            total += value * factor
        }
        return total.isFinite ? total : nil
    }

    /// ISO-8601 durations: `PT15M`, `P2D`, `P1DT12H`, `PT0.5S`, `P1W`. Years and months are refused
    /// because their length depends on the calendar.
    private static func iso8601(_ text: String) -> Double? {
        var rest = Substring(text.dropFirst())
        var inTime = false
        var total = 0.0
        var seenAny = false
        var lastRank = -1
        while !rest.isEmpty {
            if rest.first == "T" {
                guard !inTime else { return nil }
                inTime = true
                rest = rest.dropFirst()
                continue
            }
            let number = rest.prefix { $0.isASCII && ($0.isNumber || $0 == "." || $0 == ",") }
            guard !number.isEmpty, let value = Double(number.replacingOccurrences(of: ",", with: ".")),
                value.isFinite, let designator = rest.dropFirst(number.count).first
            else { return nil }
            rest = rest.dropFirst(number.count + 1)
            let (factor, rank): (Double, Int) =
                switch (inTime, designator) {
                case (false, "W"): (604_800_000, 0)
                case (false, "D"): (86_400_000, 1)
                case (true, "H"): (3_600_000, 2)
                case (true, "M"): (60_000, 3)
                case (true, "S"): (1000, 4)
                default: (0, -1)
                }
            guard rank > lastRank else { return nil }
            lastRank = rank
            total += value * factor
            seenAny = true
        }
        return seenAny && total.isFinite ? total : nil
    }
}
