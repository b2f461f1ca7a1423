import Foundation

/// The mass-expiry curve as a standalone SVG: expiries per second (ours, raw, and the 0.5× raw
/// target) and the first expiry's lateness (ours, raw's first commit, and the 10 ms target)
/// against N, both axes on log scales.
enum MassPlot {
    struct Point {
        var n: Int
        var ours: Double
        var raw: Double?
    }

    /// The plot of the SQLite mass-expiry lines among `figures`, or nil when there are none.
    static func svg(_ figures: [Figure], batch: Int) -> String? {
        func points(_ prefix: String) -> [Point] {
            figures.filter { $0.name.hasPrefix(prefix) }.map { Point(n: $0.n, ours: $0.ours, raw: $0.raw) }.sorted { $0.n < $1.n }
        }
        let rates = points("mass expiry: expiries per second")
        let firsts = points("mass expiry: first expiry read")
        guard !rates.isEmpty else { return nil }
        return svg(rates: rates, firsts: firsts, batch: batch)
    }

    static let width = 720.0
    static let panelHeight = 250.0
    static let left = 86.0
    static let right = 176.0
    static let top = 84.0
    static let gap = 74.0

    static func svg(rates: [Point], firsts: [Point], batch: Int) -> String {
        let ns = (rates + firsts).map { Double($0.n) }
        let xRange = decades(ns)
        var body: [String] = []
        body.append(text(width / 2, 24, "Mass expiry: N countdowns due at one instant (SQLite)", size: 16, anchor: "middle", weight: "bold"))
        body.append(text(
            width / 2, 42, "ours: lines read from countdown run --consumer sale; raw: UPDATE + INSERT, \(batch) rows per transaction",
            size: 11, anchor: "middle", fill: "#555"))

        let rateValues = rates.flatMap { point -> [Double] in [point.ours, point.raw, point.raw.map { $0 / 2 }].compactMap { $0 } }
        body += panel(
            y: top, title: "expiries per second", xRange: xRange, yRange: decades(rateValues),
            series: [
                Series(label: "ours", color: "#1f6fd1", dash: nil, marker: "circle", points: rates.map { (Double($0.n), $0.ours) }),
                Series(label: "raw", color: "#666", dash: "6 4", marker: "square", points: rates.compactMap { p in p.raw.map { (Double(p.n), $0) } }),
                Series(
                    label: "target: 0.5× raw", color: "#2a9d3a", dash: "2 4", marker: nil,
                    points: rates.compactMap { p in p.raw.map { (Double(p.n), $0 / 2) } }),
            ])
        let firstValues = firsts.flatMap { point -> [Double] in [point.ours, point.raw].compactMap { $0 } } + [10]
        body += panel(
            y: top + panelHeight + gap, title: "first expiry after the instant (ms)", xRange: xRange, yRange: decades(firstValues),
            series: [
                Series(label: "ours", color: "#d1701f", dash: nil, marker: "circle", points: firsts.map { (Double($0.n), $0.ours) }),
                Series(
                    label: "raw: first commit", color: "#666", dash: "6 4", marker: "square",
                    points: firsts.compactMap { p in p.raw.map { (Double(p.n), $0) } }),
                Series(
                    label: "target: 10 ms", color: "#c62828", dash: "2 4", marker: nil,
                    points: [(pow(10, xRange.lowerBound), 10), (pow(10, xRange.upperBound), 10)]),
            ])
        let height = top + 2 * panelHeight + gap + 48
        body.append(text(left + (width - left - right) / 2, height - 12, "N (countdowns due at one instant, log scale)", size: 12, anchor: "middle"))
        return """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" viewBox="0 0 \(Int(width)) \(Int(height))" font-family="Helvetica, Arial, sans-serif">
            <rect width="100%" height="100%" fill="#fff"/>
            \(body.joined(separator: "\n"))
            </svg>

            """
    }

    struct Series {
        var label: String
        var color: String
        var dash: String?
        var marker: String?
        var points: [(Double, Double)]
    }

    /// A panel at `y`: log-scale axes over the decades `xRange` and `yRange` (powers of ten),
    /// gridlines at each decade, each series as a polyline with its markers and a legend entry.
    static func panel(y: Double, title: String, xRange: ClosedRange<Double>, yRange: ClosedRange<Double>, series: [Series]) -> [String] {
        let plotWidth = width - left - right
        func px(_ value: Double) -> Double { left + (log10(value) - xRange.lowerBound) / (xRange.upperBound - xRange.lowerBound) * plotWidth }
        func py(_ value: Double) -> Double {
            y + panelHeight - (log10(value) - yRange.lowerBound) / (yRange.upperBound - yRange.lowerBound) * panelHeight
        }
        var out: [String] = []
        out.append(text(left, y - 8, title, size: 13, weight: "bold"))
        out.append(
            "<rect x=\"\(f(left))\" y=\"\(f(y))\" width=\"\(f(plotWidth))\" height=\"\(f(panelHeight))\" fill=\"none\" stroke=\"#999\"/>")
        for decade in Int(xRange.lowerBound)...Int(xRange.upperBound) {
            let x = px(pow(10, Double(decade)))
            out.append("<line x1=\"\(f(x))\" y1=\"\(f(y))\" x2=\"\(f(x))\" y2=\"\(f(y + panelHeight))\" stroke=\"#e3e3e3\"/>")
            out.append(text(x, y + panelHeight + 16, label(decade), size: 11, anchor: "middle"))
        }
        for decade in Int(yRange.lowerBound)...Int(yRange.upperBound) {
            let yy = py(pow(10, Double(decade)))
            out.append("<line x1=\"\(f(left))\" y1=\"\(f(yy))\" x2=\"\(f(left + plotWidth))\" y2=\"\(f(yy))\" stroke=\"#e3e3e3\"/>")
            out.append(text(left - 6, yy + 4, label(decade), size: 11, anchor: "end"))
        }
        for (index, one) in series.enumerated() {
            let shown = one.points.filter { $0.0 > 0 && $0.1 > 0 && $0.0.isFinite && $0.1.isFinite }
            let dash = one.dash.map { " stroke-dasharray=\"\($0)\"" } ?? ""
            if shown.count > 1 {
                let path = shown.map { "\(f(px($0.0))),\(f(py($0.1)))" }.joined(separator: " ")
                out.append("<polyline points=\"\(path)\" fill=\"none\" stroke=\"\(one.color)\" stroke-width=\"2\"\(dash)/>")
            }
            for point in shown {
                let (x, yy) = (px(point.0), py(point.1))
                switch one.marker {
                case "circle"?: out.append("<circle cx=\"\(f(x))\" cy=\"\(f(yy))\" r=\"4\" fill=\"\(one.color)\"/>")
                case "square"?: out.append("<rect x=\"\(f(x - 3.5))\" y=\"\(f(yy - 3.5))\" width=\"7\" height=\"7\" fill=\"\(one.color)\"/>")
                default: break
                }
                if one.marker == "circle" {
                    // Near the right edge the value goes to the left of its point, clear of the legend.
                    let leftward = x > left + plotWidth * 0.85
                    out.append(
                        text(leftward ? x - 7 : x + 7, yy - 7, Target.number(point.1), size: 10, anchor: leftward ? "end" : "start", fill: one.color))
                }
            }
            let legendY = y + 14 + Double(index) * 20
            let legendX = left + plotWidth + 16
            out.append(
                "<line x1=\"\(f(legendX))\" y1=\"\(f(legendY))\" x2=\"\(f(legendX + 24))\" y2=\"\(f(legendY))\" stroke=\"\(one.color)\" stroke-width=\"2\"\(dash)/>"
            )
            out.append(text(legendX + 30, legendY + 4, one.label, size: 11))
        }
        return out
    }

    /// The smallest range of whole powers of ten (as exponents) that holds every positive value.
    static func decades(_ values: [Double]) -> ClosedRange<Double> {
        let logs = values.filter { $0 > 0 && $0.isFinite }.map(log10)
        guard let low = logs.min(), let high = logs.max() else { return 0...1 }
        let lower = low.rounded(.down)
        let upper = max(lower + 1, high.rounded(.up))
        return lower...upper
    }

    static func label(_ decade: Int) -> String {
        switch decade {
        case ..<0: return String(format: "%g", pow(10, Double(decade)))
        case 0..<3: return String(Int(pow(10, Double(decade))))
        case 3..<6: return "\(Int(pow(10, Double(decade - 3))))k"
        case 6..<9: return "\(Int(pow(10, Double(decade - 6))))M"
        default: return "1e\(decade)"
        }
    }

    static func f(_ value: Double) -> String { String(format: "%.1f", value) }

    static func text(
        _ x: Double, _ y: Double, _ content: String, size: Int, anchor: String = "start", weight: String = "normal", fill: String = "#222"
    ) -> String {
        let escaped = content.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
        return "<text x=\"\(f(x))\" y=\"\(f(y))\" font-size=\"\(size)\" text-anchor=\"\(anchor)\" font-weight=\"\(weight)\" fill=\"\(fill)\">\(escaped)</text>"
    }

    /// Where the plot goes by default: `Benchmarks/mass-expiry.svg` in the package these sources
    /// were built from, or the current folder when that is gone.
    static var defaultPath: String {
        let benchmarks = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: benchmarks.path, isDirectory: &isFolder), isFolder.boolValue {
            return benchmarks.appendingPathComponent("mass-expiry.svg").path
        }
        return "mass-expiry.svg"
    }
}
