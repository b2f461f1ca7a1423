import Foundation

/// How a figure is judged.
enum Target {
    /// Ours divided by raw must be at least this (throughputs: higher is better).
    case atLeastRatio(Double)
    /// Ours divided by raw must be at most this (latencies: lower is better).
    case atMostRatio(Double)
    /// Ours must be at most this, in the row's unit.
    case atMost(Double)
    /// Ours must be at least this, in the row's unit.
    case atLeast(Double)
    /// A figure for the record, not judged.
    case unjudged

    var text: String {
        switch self {
        case .atLeastRatio(let ratio): "≥ \(ratio)× raw"
        case .atMostRatio(let ratio): "≤ \(ratio)× raw"
        case .atMost(let value): "≤ \(Self.number(value))"
        case .atLeast(let value): "≥ \(Self.number(value))"
        case .unjudged: "—"
        }
    }

    /// Whether the figure is judged at all.
    var judged: Bool {
        if case .unjudged = self { return false }
        return true
    }

    static func number(_ value: Double) -> String {
        if value == 0 { return "0" }
        if !value.isFinite { return value.isNaN ? "—" : "∞" }
        if value >= 1000 { return String(format: "%.0f", value) }
        if value >= 100 { return String(format: "%.1f", value) }
        if value >= 1 { return String(format: "%.2f", value) }
        return String(format: "%.3f", value)
    }
}

/// One line of the table: our figure beside the raw SQLite figure for the same work.
struct Figure {
    var name: String
    var n: Int
    var ours: Double
    /// The same work through the raw C API (or the bare system call, for wake-ups), when one exists.
    var raw: Double?
    var unit: String
    var target: Target

    var ratio: Double? {
        guard let raw, raw > 0 else { return nil }
        return ours / raw
    }

    var meets: Bool {
        switch target {
        case .atLeastRatio(let wanted): (ratio ?? 0) >= wanted
        case .atMostRatio(let wanted): (ratio ?? .infinity) <= wanted
        case .atMost(let limit): ours <= limit
        case .atLeast(let limit): ours >= limit
        case .unjudged: true
        }
    }
}

enum Report {
    static func table(_ figures: [Figure]) -> String {
        let header = ["operation", "n", "ours", "raw", "unit", "ratio", "target", "meets"]
        let rows = figures.map { figure in
            [
                figure.name, "\(figure.n)", Target.number(figure.ours), figure.raw.map(Target.number) ?? "—",
                figure.unit, figure.ratio.flatMap { $0.isFinite ? String(format: "%.2f×", $0) : nil } ?? "—", figure.target.text,
                figure.target.judged ? (figure.meets ? "yes" : "NO") : "—",
            ]
        }
        let widths = header.indices.map { column in
            ([header] + rows).map { $0[column].count }.max() ?? 0
        }
        func line(_ cells: [String]) -> String {
            "| " + cells.enumerated().map { index, cell in
                cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
            }.joined(separator: " | ") + " |"
        }
        let rule = "|" + widths.map { String(repeating: "-", count: $0 + 2) }.joined(separator: "|") + "|"
        return ([line(header), rule] + rows.map(line)).joined(separator: "\n")
    }

    /// The figures of a file written by ``json(_:)``, for plotting again (their targets are not read back).
    static func figures(json data: Data) throws -> [Figure] {
        guard let objects = try JSONSerialization.jsonObject(with: data) as? [[String: Any]] else {
            throw BenchmarkError("not a list of figures")
        }
        return objects.compactMap { object in
            guard let name = object["name"] as? String, let n = object["n"] as? Int else { return nil }
            return Figure(
                name: name, n: n, ours: (object["ours"] as? Double) ?? .nan, raw: object["raw"] as? Double,
                unit: (object["unit"] as? String) ?? "", target: .unjudged)
        }
    }

    static func json(_ figures: [Figure]) throws -> Data {
        let objects: [[String: Any]] = figures.map { figure in
            [
                "name": figure.name, "n": figure.n, "ours": figure.ours.isFinite ? figure.ours : NSNull(), "raw": figure.raw ?? NSNull(),
                "unit": figure.unit, "ratio": figure.ratio.flatMap { $0.isFinite ? $0 : nil } ?? NSNull(), "target": figure.target.text,
                "meets": figure.target.judged ? figure.meets : NSNull(),
            ]
        }
        return try JSONSerialization.data(withJSONObject: objects, options: [.prettyPrinted, .sortedKeys])
    }
}
