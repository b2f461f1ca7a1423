import ArgumentParser
import CountdownStore
import Foundation

extension CountdownCommand {
    /// `countdown demo`: the product in one command.
    struct Demo: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show CountdownStore in one command: start a few countdowns, watch them, run it again later.",
            discussion: """
                Uses countdown-demo.sqlite in the default folder unless --db is given. The first run starts \
                countdowns of both policies; later runs find them carried on across the restart and report \
                what expired meanwhile. Ends by itself (after about 10 s when not on a terminal).
                """)

        @OptionGroup var global: GlobalOptions
        @Option(help: "How long to show the live view, in seconds (default 10 off a terminal, 30 on one).")
        var seconds: Double?

        /// The demo's countdowns: key, duration, group, policy.
        static let items: [(String, Duration, String, CountdownPolicy)] = [
            ("otp:alice", .seconds(6), "codes", .wall),
            ("tea", .seconds(45), "kitchen", .wall),
            ("build-42", .seconds(8), "ci", .active),
            ("deploy", .seconds(25), "ci", .active),
            ("order-1042", .seconds(15 * 60), "payments", .wall),
            ("screen-time", .seconds(2 * 60), "app", .active),
        ]

        func run() async throws {
            if let seconds, !(seconds > 0 && seconds <= 86_400) {
                throw CountdownError(.invalidArgument, "invalid --seconds \(seconds): must be between 0 and 86400")
            }
            try await withStore(global, defaultFile: "countdown-demo.sqlite") { store in
                let path = store.path ?? ""
                let caughtUp = try await store.expireDue()
                if try await store.counts().total == 0 {
                    try await store.start(
                        Self.items.map { .countdown($0.0, duration: $0.1, group: $0.2, policy: $0.3) })
                    try await store.startStopwatch("uptime", group: "app", policy: .active)
                    print("Started \(Self.items.count) countdowns and a stopwatch in \(path).")
                    print("`wall` ones keep counting while nothing runs; `active` ones count only while a ticker runs.")
                    print("Run `countdown demo` again later: they carry on across the restart.\n")
                } else {
                    print("Welcome back to \(path): the countdowns carried on across the restart.")
                    if caughtUp.isEmpty {
                        print("Nothing came due while the demo was not running.\n")
                    } else {
                        print("Caught up: \(caughtUp.count) expired while the demo was not running:")
                        let expiries = try await store.recentEvents(kinds: [.expired], limit: max(1, caughtUp.count))
                        for event in expiries.reversed() {
                            print(
                                "  \(TerminalText.safe(event.key ?? ""))  came due "
                                    + "\(event.deadlineAt.map { StoreTime.iso8601($0) } ?? "?")  "
                                    + "(late by \(DurationText.format(event.late ?? .zero)))"
                            )
                        }
                        print()
                    }
                    if try await store.list(.active).isEmpty {
                        print("Everything has expired; remove \(path) to start over.\n")
                    }
                }
                try await showLiveView(
                    store: store, group: nil, states: .active, interval: .seconds(1),
                    seconds: seconds ?? (LiveView.isTerminal ? 30 : 10), title: "countdown demo")
            }
        }
    }
}
