import ArgumentParser
import CountdownStore
import Foundation

extension CountdownCommand {
    /// `countdown watch`: the live view.
    struct Watch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Watch countdowns live: progress, remaining time, state, group and policy.",
            discussion: "When standard output is not a terminal, prints the countdowns once as plain lines.")

        @OptionGroup var global: GlobalOptions
        @Option(help: "Only this group.") var group: String?
        @Option(help: "How often to refresh.") var interval: String = "1s"
        @Option(help: "active, running or paused.") var state: StateFilter = .active

        func run() async throws {
            let every = try DurationText.parse(interval)
            guard [.active, .running, .paused].contains(state) else {
                throw CountdownError(
                    .invalidArgument, "invalid state '\(state.rawValue)' for watch: use active, running or paused")
            }
            try await withStore(global) { store in
                guard LiveView.isTerminal else {
                    let items = try await store.list(state, group: group, limit: 10_000)
                    LiveView.lines(items, width: LiveView.columns ?? 120, color: false).forEach { print($0) }
                    return
                }
                try await showLiveView(
                    store: store, group: group, states: state, interval: every, seconds: nil,
                    title: "countdown watch\(group.map { " — group \(TerminalText.safe($0))" } ?? "")")
            }
        }
    }
}
