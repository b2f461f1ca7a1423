import CountdownStore
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The live terminal view of `watch` and `demo`: a row per countdown with a progress bar,
/// remaining time, state, group and policy. Items that expire stay a moment, marked.
struct LiveView {
    /// How long an item that just expired stays on screen.
    static let lingerMs: Int64 = 5000

    private var lingering: [String: (item: Countdown, untilMs: Int64)] = [:]
    private var previous: [String: Countdown] = [:]

    /// Whether standard output is a terminal.
    static var isTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

    /// The terminal's width in columns (80 when unknown).
    static var width: Int { columns ?? 80 }

    /// The columns output is fitted to: the terminal's width when standard output is a terminal,
    /// else `$COLUMNS` when it is set to a positive number, else `nil`.
    static var columns: Int? {
        var size = winsize()
        if ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return ProcessInfo.processInfo.environment["COLUMNS"].flatMap(Int.init).flatMap { $0 > 0 ? $0 : nil }
    }

    /// Folds in a new snapshot; returns the rows to show, with just-ended items kept a moment.
    mutating func update(_ items: [Countdown], at wallMs: Int64) -> [Countdown] {
        let current = Dictionary(items.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        // An item that vanished from the active set or expired: it lingers, marked expired, if it
        // did expire or was a countdown within two seconds of zero when last seen.
        for (key, item) in previous where current[key] == nil || current[key]?.state == .expired {
            var ended = current[key] ?? item
            if ended.state == .expired || item.kind == .countdown && (item.remaining ?? .zero) <= .seconds(2) {
                ended.state = .expired
                ended.remaining = .zero
                lingering[key] = lingering[key] ?? (ended, wallMs + Self.lingerMs)
            }
        }
        lingering = lingering.filter { $0.value.untilMs > wallMs && current[$0.key]?.isActive != true }
        previous = current.filter { $0.value.isActive }
        return items.filter { $0.isActive } + lingering.values.map(\.item).sorted { $0.key < $1.key }
    }

    /// One line per item, fitted to `width` columns, colored when `color`.
    static func lines(_ items: [Countdown], width: Int, color: Bool) -> [String] {
        guard !items.isEmpty else { return ["no active countdowns"] }
        let keys = items.map { TerminalText.safe($0.key) }
        let groups = items.map { TerminalText.safe($0.group ?? "-") }
        let keyWidth = min(max(keys.map { TerminalText.width($0) }.max() ?? 3, 3), max(12, width / 4))
        let barWidth = max(10, min(30, width - keyWidth - 50))
        let groupWidth = min(max(groups.map { TerminalText.width($0) }.max() ?? 1, 5), 20)
        return zip(items, zip(keys, groups)).map { item, text in
            let key = TerminalText.fit(text.0, to: keyWidth)
            let bar = progressBar(item, width: barWidth)
            let figure = TerminalText.pad(
                item.remaining.map(DurationText.format) ?? DurationText.format(item.elapsed) + "↑", to: 8)
            let state = TerminalText.pad(item.state.rawValue, to: 9)
            let group = TerminalText.fit(text.1, to: groupWidth)
            let line = "\(key)  \(bar)  \(figure)  \(state)  \(group)  \(item.policy.rawValue)"
            let fitted = TerminalText.cut(line, to: width)
            guard color else { return fitted }
            let code =
                switch item.state {
                case .running: item.remaining.map { $0 <= .seconds(10) } == true ? "33" : "32"
                case .paused: "36"
                case .expired: "31;1"
                case .cancelled: "90"
                }
            return "\u{1B}[\(code)m\(fitted)\u{1B}[0m"
        }
    }

    /// `[########------]`: how much of a countdown has gone; a moving mark for a stopwatch.
    static func progressBar(_ item: Countdown, width: Int) -> String {
        let inner = width - 2
        guard let duration = item.duration, duration > .zero else {
            let position = Int(milliseconds(item.elapsed) / 1000) % max(inner, 1)
            return "[" + String(repeating: "·", count: position) + "•"
                + String(repeating: "·", count: max(0, inner - position - 1)) + "]"
        }
        let fraction =
            item.state == .expired ? 1 : min(1, Double(milliseconds(item.elapsed)) / Double(milliseconds(duration)))
        let filled = Int((fraction * Double(inner)).rounded(.down))
        return "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: inner - filled) + "]"
    }
}

/// The terminal, while a live view owns it.
enum Screen {
    static func enter() { write("\u{1B}[?25l\u{1B}[2J") }
    static func leave() { write("\u{1B}[0m\u{1B}[?25h\n") }

    static func draw(header: String, lines: [String]) {
        write("\u{1B}[H" + ([header, ""] + lines).map { $0 + "\u{1B}[K" }.joined(separator: "\n") + "\u{1B}[J")
    }

    static func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }
}

/// Runs an action on SIGINT or SIGTERM (cancelling a task, so a live view can tidy the terminal
/// and exit 0).
final class SignalStop {
    private let sources: [any DispatchSourceSignal]

    /// Cancels `task` on SIGINT or SIGTERM.
    convenience init(cancelling task: Task<Void, any Error>) {
        self.init { task.cancel() }
    }

    /// Calls `action` on each SIGINT or SIGTERM.
    init(_ action: @escaping @Sendable () -> Void) {
        sources = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number)
            source.setEventHandler { action() }
            source.resume()
            return source
        }
    }

    deinit {
        sources.forEach { $0.cancel() }
    }
}

/// Shows the live view of `store`'s items until `seconds` pass (forever when nil) or the user
/// presses Ctrl-C. Not on a terminal, prints plain blocks every `plainEvery` instead.
func showLiveView(
    store: CountdownStore, group: String?, states: StateFilter, interval: Duration, seconds: Double?,
    title: String, plainEvery: Duration = .seconds(2)
) async throws {
    let ticker = CountdownTicker(store: store)
    let terminal = LiveView.isTerminal
    let ticks = try ticker.ticks(group: group, every: terminal ? interval : plainEvery)
    let work = Task {
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await ticker.run() }
            tasks.addTask {
                var view = LiveView()
                let end = seconds.map { Date().addingTimeInterval($0) }
                if terminal { Screen.enter() }
                defer { if terminal { Screen.leave() } }
                for await snapshot in ticks {
                    let rows = view.update(snapshot.items, at: snapshot.time.wall).filter { item in
                        switch states {
                        case .running: item.state == .running || item.state == .expired
                        case .paused: item.state == .paused
                        default: true
                        }
                    }
                    let header = "\(title) — \(StoreTime.iso8601(milliseconds: snapshot.time.wall))"
                    if terminal {
                        let width = LiveView.width
                        Screen.draw(
                            header: TerminalText.cut(header + "  (Ctrl-C to quit)", to: width),
                            lines: LiveView.lines(rows, width: width, color: true))
                    } else {
                        print(
                            ([header] + LiveView.lines(rows, width: LiveView.columns ?? 120, color: false)).joined(
                                separator: "\n") + "\n")
                    }
                    if let end, Date() >= end { break }
                }
            }
            _ = try await tasks.next()
            tasks.cancelAll()
        }
    }
    let stop = SignalStop(cancelling: work)
    defer { withExtendedLifetime(stop) {} }
    do {
        try await work.value
    } catch is CancellationError {}
}
