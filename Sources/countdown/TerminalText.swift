/// Text fitted to a terminal: measured in the columns a terminal draws, cut only between
/// characters (grapheme clusters), with stored text made safe to print.
///
/// A key or group is arbitrary UTF-8 that a host may have written with `sqlite3`. Before it
/// reaches the terminal, every control character, line or paragraph separator and bidirectional
/// control is shown as an escape (`\n`, `\t`, `\u{1B}`, `\u{202E}`): data never moves the cursor,
/// colors the screen or reorders the line. Bytes that were not UTF-8 reach the tool as U+FFFD
/// (the library reads text as Swift does), and are shown as `\u{FFFD}`.
enum TerminalText {
    /// The mark left where text was cut.
    static let cutMark: Character = "…"

    /// `text` with everything that must not reach a terminal raw written as an escape.
    static func safe(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            guard needsEscape(scalar) || scalar == "\\" else {
                out.unicodeScalars.append(scalar)
                continue
            }
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\\": out += "\\\\"
            default: out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            }
        }
        return out
    }

    /// Whether `scalar` is shown as an escape: C0 and C1 controls and DEL, the line and paragraph
    /// separators, the bidirectional embeddings, overrides, isolates and marks, and U+FFFD. A
    /// backslash is escaped too in text that has any of these, so that an escape is never ambiguous.
    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: true
        case 0x2028, 0x2029: true
        case 0x200E, 0x200F, 0x061C, 0x202A...0x202E, 0x2066...0x2069: true
        case 0xFFFD: true
        default: false
        }
    }

    /// The columns a terminal gives one scalar on its own: 0, 1 or 2.
    static func width(of scalar: Unicode.Scalar) -> Int {
        let value = scalar.value
        if value < 0x7F { return value < 0x20 ? 0 : 1 }
        if contains(TerminalWidthTables.zero, value) { return 0 }
        return contains(TerminalWidthTables.wide, value) ? 2 : 1
    }

    /// The columns a terminal gives one character (a grapheme cluster): the width of its first
    /// scalar that has one (the base; the marks, joiners and selectors after it add nothing),
    /// two for an emoji presentation (U+FE0F) and for a flag (regional indicators).
    static func width(of character: Character) -> Int {
        let scalars = character.unicodeScalars
        guard let first = scalars.first else { return 0 }
        if (0x1F1E6...0x1F1FF).contains(first.value) { return 2 }
        if scalars.contains(where: { $0.value == 0xFE0F }) { return 2 }
        for scalar in scalars {
            let width = width(of: scalar)
            if width > 0 { return width }
        }
        return 0
    }

    /// The columns `text` takes on a terminal, as it is (call ``safe(_:)`` first for stored text).
    static func width(_ text: String) -> Int {
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return text.utf8.count }
        return text.reduce(0) { $0 + width(of: $1) }
    }

    /// `text` in at most `columns` columns: whole when it fits, else cut after the last whole
    /// character that leaves room for `…`.
    static func cut(_ text: String, to columns: Int) -> String {
        guard width(text) > columns else { return text }
        guard columns > 0 else { return "" }
        var out = ""
        var used = 0
        for character in text {
            let width = width(of: character)
            if used + width > columns - 1 { break }
            out.append(character)
            used += width
        }
        out.append(cutMark)
        return out
    }

    /// `text` cut to `columns` if it is wider, then padded with spaces to exactly `columns`.
    static func fit(_ text: String, to columns: Int) -> String {
        pad(cut(text, to: columns), to: columns)
    }

    /// `text` followed by spaces up to `columns` columns (nothing added when it is as wide already).
    static func pad(_ text: String, to columns: Int) -> String {
        let width = width(text)
        return width >= columns ? text : text + String(repeating: " ", count: columns - width)
    }

    /// Whether a sorted list of disjoint ranges holds `value`.
    private static func contains(_ ranges: [ClosedRange<UInt32>], _ value: UInt32) -> Bool {
        var low = 0
        var high = ranges.count - 1
        while low <= high {
            let middle = (low + high) / 2
            if value < ranges[middle].lowerBound {
                high = middle - 1
            } else if value > ranges[middle].upperBound {
                low = middle + 1
            } else {
                return true
            }
        }
        return false
    }
}
