import CountdownStore
import Foundation

/// A JSON value with its object keys in the order they were given.
indirect enum JSON {
    case null
    case bool(Bool)
    case int(Int64)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    static func string(_ value: String?) -> JSON { value.map(JSON.string) ?? .null }
    static func int(_ value: Int64?) -> JSON { value.map(JSON.int) ?? .null }
    static func instant(_ date: Date?) -> JSON { date.map { .string(StoreTime.iso8601($0)) } ?? .null }
    static func duration(_ value: Duration?) -> JSON { value.map { .int(milliseconds($0)) } ?? .null }

    var text: String {
        var out = ""
        write(to: &out)
        return out
    }

    /// Appends this value's text to `out`: one string for the whole value, however deep.
    func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let value): out += value ? "true" : "false"
        case .int(let value): out += String(value)
        case .string(let value): Self.quote(value, to: &out)
        case .array(let values):
            out += "["
            for (index, value) in values.enumerated() {
                if index > 0 { out += "," }
                value.write(to: &out)
            }
            out += "]"
        case .object(let fields):
            out += "{"
            for (index, (name, value)) in fields.enumerated() {
                if index > 0 { out += "," }
                Self.quote(name, to: &out)
                out += ":"
                value.write(to: &out)
            }
            out += "}"
        }
    }

    /// Appends `value` as a JSON string; text with nothing to escape (the usual key or
    /// instant) is appended whole.
    private static func quote(_ value: String, to out: inout String) {
        out += "\""
        guard value.utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C || $0 == 0x7F }) else {
            out += value
            out += "\""
            return
        }
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

/// Whole milliseconds of a duration.
func milliseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    return seconds * 1000 + attoseconds / 1_000_000_000_000_000
}

extension Countdown {
    /// The object `show --json` prints: exactly the fields of the tool's contract.
    var json: JSON {
        .object([
            ("key", .string(key)),
            ("group", .string(group)),
            ("kind", .string(kind.rawValue)),
            ("policy", .string(policy.rawValue)),
            ("state", .string(state.rawValue)),
            ("duration_ms", .duration(duration)),
            ("elapsed_ms", .duration(elapsed)),
            ("remaining_ms", .duration(remaining)),
            ("started_at", .instant(startedAt)),
            ("deadline_at", .instant(deadlineAt)),
            ("expired_at", .instant(expiredAt)),
            ("generation", .int(generation)),
            ("payload", .string(payload?.jsonText)),
            ("rule", .string(rule?.rawValue)),
            ("max_wait_ms", .duration(maxWait)),
            ("bound_at", .instant(boundAt)),
        ])
    }

    /// What remains (or has elapsed, for a stopwatch), for people.
    var figure: String {
        if !state.isActive { return "after " + DurationText.format(elapsed) }
        if let remaining { return DurationText.format(remaining) + " left" }
        return DurationText.format(elapsed) + " elapsed"
    }

    /// `key: value` lines for `show`.
    var details: String {
        var lines: [(String, String)] = [
            ("key", TerminalText.safe(key)), ("group", TerminalText.safe(group ?? "-")), ("kind", kind.rawValue),
        ]
        if let rule { lines.append(("rule", ruleDetails(rule))) }
        lines += [("policy", policy.rawValue), ("state", state.rawValue)]
        if let duration { lines.append(("duration", DurationText.format(duration))) }
        lines.append(("elapsed", DurationText.format(elapsed)))
        if let remaining { lines.append(("remaining", DurationText.format(remaining))) }
        lines.append(("started at", StoreTime.iso8601(startedAt)))
        if let deadlineAt {
            lines.append(("deadline at", StoreTime.iso8601(deadlineAt)))
        } else if state == .running, kind == .countdown {
            lines.append(("deadline at", "- (an active countdown counts only while a ticker runs)"))
        }
        if let expiredAt { lines.append(("expired at", StoreTime.iso8601(expiredAt))) }
        lines.append(("generation", String(generation)))
        if let payload { lines.append(("payload", TerminalText.safe(payload.jsonText))) }
        return lines.map { "\($0.0.padding(toLength: 12, withPad: " ", startingAt: 0)) \($0.1)" }.joined(
            separator: "\n")
    }

    /// The `rule` line of `show`: `cooldown`, or `debounce (max wait 30m00s, bound …)`, the bound
    /// while one is known.
    private func ruleDetails(_ rule: CountdownRule) -> String {
        guard rule == .debounce, let maxWait else { return rule.rawValue }
        let bound = boundAt.map { ", bound \(StoreTime.iso8601($0))" } ?? ""
        return "\(rule.rawValue) (max wait \(DurationText.format(maxWait))\(bound))"
    }
}

/// Prints items a page at a time, as they are read.
protocol ItemPrinter {
    /// Prints one page of items.
    mutating func print(_ items: [Countdown])
    /// Ends the output.
    mutating func finish()
}

/// One JSON array, an object per line, printed as pages come: memory does not grow with the count.
struct JSONArrayPrinter: ItemPrinter {
    private var first = true

    mutating func print(_ items: [Countdown]) {
        for item in items {
            Swift.print(first ? "[" : ",", terminator: "")
            Swift.print(item.json.text)
            first = false
        }
    }

    mutating func finish() {
        Swift.print(first ? "[]" : "]")
    }
}

/// A table for people, printed as pages come; columns are as wide as the widest value so far,
/// measured in terminal columns. Given a width (the terminal's, or `$COLUMNS`), keys and groups
/// are cut with `…` so that a row fits it; without one (a pipe), every value is shown whole.
struct TablePrinter: ItemPrinter {
    private var widths: [Int]?
    private let columns: Int?

    private static let header = ["KEY", "STATE", "REMAINING", "ELAPSED", "GROUP", "POLICY", "KIND"]
    private static let separator = "  "

    /// A table fitted to `columns` terminal columns, or of whole values when `nil`.
    init(columns: Int? = nil) {
        self.columns = columns
    }

    mutating func print(_ items: [Countdown]) {
        guard !items.isEmpty else { return }
        let rows = items.map { item in
            [
                TerminalText.safe(item.key), item.state.rawValue, item.remaining.map(DurationText.format) ?? "-",
                DurationText.format(item.elapsed), TerminalText.safe(item.group ?? "-"), item.policy.rawValue,
                item.kind.rawValue,
            ]
        }
        let first = widths == nil
        var widths = widths ?? Self.header.map { TerminalText.width($0) }
        for row in rows {
            for (column, value) in row.enumerated() { widths[column] = max(widths[column], TerminalText.width(value)) }
        }
        if let columns { widths = Self.fitted(widths, to: columns) }
        self.widths = widths
        for row in (first ? [Self.header] : []) + rows {
            Swift.print(
                zip(row, widths).map { TerminalText.fit($0, to: $1) }.joined(separator: Self.separator)
                    .trimmingCharacters(in: .whitespaces))
        }
    }

    /// `widths` with the group's column at most 20 and the key's given what the others leave of
    /// `columns` (at least 12), so that a row fits when the terminal allows.
    private static func fitted(_ widths: [Int], to columns: Int) -> [Int] {
        var widths = widths
        widths[4] = min(widths[4], 20)
        let others = widths.dropFirst().reduce(0, +) + separator.count * (widths.count - 1)
        widths[0] = min(widths[0], max(12, columns - others))
        return widths
    }

    mutating func finish() {
        if widths == nil { Swift.print("no countdowns") }
    }
}

/// Prints one changed item: its details, or its JSON object.
func report(_ item: Countdown, json: Bool) {
    if json {
        print(item.json.text)
    } else {
        print("\(TerminalText.safe(item.key)): \(item.state.rawValue), \(item.figure)")
    }
}
