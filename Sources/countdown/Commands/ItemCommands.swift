import ArgumentParser
import CountdownStore
import Foundation

extension CountdownCommand {
    /// `countdown start KEY DURATION`.
    struct Start: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Start a countdown.")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The countdown's unique key.") var key: String
        @Argument(help: "How long it runs: 90s, 15m, 1h30m, 2d, 250ms, PT15M, or seconds.") var duration: String
        @Option(help: "A group to file it under.") var group: String?
        @Option(help: "wall (keeps counting while nothing runs) or active (counts only while a host runs).")
        var policy: CountdownPolicy = .wall
        @Option(help: "Text to keep with it and get back with its expiry.") var payload: String?
        @Flag(help: "Start it again if the key is already running or paused.") var replace = false
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let length = try DurationText.parse(duration)
            let item = try await withStore(global) { store in
                try await store.start(
                    key, duration: length, group: group, policy: policy, payload: payload.map(CountdownPayload.text),
                    whenActive: replace ? .replace : .refuse)
            }
            report(item, json: output.json)
        }
    }

    /// `countdown stopwatch KEY`.
    struct StartStopwatch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "stopwatch", abstract: "Start a stopwatch.")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The stopwatch's unique key.") var key: String
        @Option(help: "A group to file it under.") var group: String?
        @Option(help: "wall or active.") var policy: CountdownPolicy = .wall
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let item = try await withStore(global) { store in
                try await store.startStopwatch(key, group: group, policy: policy)
            }
            report(item, json: output.json)
        }
    }

    /// `countdown show KEY`.
    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one countdown.")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The key.") var key: String
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let found = try await withStore(global) { store in try await store.countdown(key) }
            guard let item = found else { throw CountdownError(.notFound, "no countdown with key '\(key)'") }
            print(output.json ? item.json.text : item.details)
        }
    }

    /// `countdown list`.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List countdowns: active ones soonest to expire first, ended ones most recent first.",
            discussion: """
                A countdown whose remaining time has reached zero is listed as expired, whether or not a \
                ticker has recorded it yet. Items are read a page at a time, so --all lists a store of any \
                size in constant memory; --json prints one JSON array as it goes.
                """)

        @OptionGroup var global: GlobalOptions
        @Option(help: "active, running, paused, expired, cancelled or all.") var state: StateFilter = .active
        @Option(help: "Only this group.") var group: String?
        @Option(help: "At most this many (any positive count; default 100).") var limit: Int?
        @Flag(help: "Every item, however many.") var all = false
        @OptionGroup var output: OutputOptions

        /// Items read per page.
        static let pageSize = 1000

        func run() async throws {
            if all, let limit {
                throw CountdownError(.invalidArgument, "invalid limit \(limit) with --all: give one or the other")
            }
            let wanted = all ? Int.max : limit ?? 100
            guard wanted >= 1 else {
                throw CountdownError(.invalidArgument, "invalid limit \(wanted): must be a positive count")
            }
            var printer: any ItemPrinter = output.json ? JSONArrayPrinter() : TablePrinter(columns: LiveView.columns)
            try await withStore(global) { store in
                var cursor: ListCursor?
                var left = wanted
                repeat {
                    let page = try await store.list(state, group: group, limit: min(left, Self.pageSize), after: cursor)
                    printer.print(page.items)
                    left -= page.items.count
                    cursor = page.next
                } while cursor != nil && left > 0
            }
            printer.finish()
        }
    }

    /// `countdown calibrate SERVER_TIME`.
    struct Calibrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set the store clock to a trusted time (ISO-8601), persisted as an offset.")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The trusted time, like 2026-11-21T08:33:16.123Z.") var serverTime: String
        @Flag(
            help:
                """
                Accept a time behind the store clock (it then advances at half speed until the time catches up) or \
                more than a day ahead of it.
                """
        )
        var force = false

        func run() async throws {
            guard let instant = parseISO8601(serverTime) else {
                throw CountdownError(
                    .invalidArgument,
                    "invalid server time '\(serverTime)': expected ISO-8601, like 2026-11-21T08:33:16Z")
            }
            let status = try await withStore(global) { store in
                try await store.calibrate(serverTime: instant, force: force)
                return try await store.clockStatus()
            }
            print("store clock: \(StoreTime.iso8601(milliseconds: status.now.wall))")
            print("calibration offset: \(milliseconds(status.calibrationOffset)) ms")
        }
    }

    /// `countdown prune --older-than DURATION`.
    struct Prune: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete expired and cancelled countdowns, and acknowledged events, older than a duration.",
            discussion: """
                Deletes in batches of short transactions, oldest first, so that other processes go on reading \
                and writing meanwhile; on a terminal it shows its progress. A running `countdown run` prunes by \
                itself (see its --retain-ended and --retain-events).
                """)

        @OptionGroup var global: GlobalOptions
        @Option(name: .customLong("older-than"), help: "How old, like 30d.") var olderThan: String

        func run() async throws {
            let age = try DurationText.parse(olderThan)
            // In batches of short transactions; on a terminal, the running totals on one line.
            let terminal = isatty(STDERR_FILENO) == 1
            let result = try await withStore(global) { store in
                try await store.prune(olderThan: age) { totals in
                    guard terminal else { return }
                    FileHandle.standardError.write(
                        Data(
                            ("\rpruning: \(totals.items) countdowns, \(totals.events) events, "
                                + "\(totals.retiredKeys) retired keys…").utf8))
                }
            }
            if terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            print("pruned \(result.items) countdowns, \(result.events) events and \(result.retiredKeys) retired keys")
        }
    }
}

/// ISO-8601 with or without fractional seconds.
func parseISO8601(_ text: String) -> Date? {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    if let date = formatter.date(from: text) { return date }
    formatter.formatOptions = [.withInternetDateTime]
    return formatter.date(from: text)
}

/// A command that takes one key and changes that item.
protocol ItemChange: AsyncParsableCommand {
    var global: GlobalOptions { get }
    var output: OutputOptions { get }
    var key: String { get }
    func change(_ store: CountdownStore) async throws -> Countdown
}

extension ItemChange {
    func run() async throws {
        let item = try await withStore(global) { store in try await change(store) }
        report(item, json: output.json)
    }
}

extension CountdownCommand {
    /// `countdown pause KEY`.
    struct Pause: ItemChange {
        static let configuration = CommandConfiguration(abstract: "Pause a running countdown.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The key.") var key: String
        @OptionGroup var output: OutputOptions
        func change(_ store: CountdownStore) async throws -> Countdown { try await store.pause(key) }
    }

    /// `countdown resume KEY`.
    struct Resume: ItemChange {
        static let configuration = CommandConfiguration(abstract: "Resume a paused countdown.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The key.") var key: String
        @OptionGroup var output: OutputOptions
        func change(_ store: CountdownStore) async throws -> Countdown { try await store.resume(key) }
    }

    /// `countdown cancel KEY`.
    struct Cancel: ItemChange {
        static let configuration = CommandConfiguration(abstract: "Cancel a running or paused countdown.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The key.") var key: String
        @OptionGroup var output: OutputOptions
        func change(_ store: CountdownStore) async throws -> Countdown { try await store.cancel(key) }
    }

    /// `countdown restart KEY`.
    struct Restart: ItemChange {
        static let configuration = CommandConfiguration(abstract: "Start a countdown again from zero.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The key.") var key: String
        @OptionGroup var output: OutputOptions
        func change(_ store: CountdownStore) async throws -> Countdown { try await store.restart(key) }
    }

    /// `countdown remove KEY`.
    struct Remove: ItemChange {
        static let configuration = CommandConfiguration(abstract: "Delete a countdown, whatever its state.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The key.") var key: String
        @OptionGroup var output: OutputOptions
        func change(_ store: CountdownStore) async throws -> Countdown { try await store.remove(key) }
    }

    /// `countdown extend KEY DURATION`.
    struct Extend: ItemChange {
        static let configuration = CommandConfiguration(abstract: "Add time to a countdown.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The key.") var key: String
        @Argument(help: "How much to add.") var duration: String
        @OptionGroup var output: OutputOptions
        func change(_ store: CountdownStore) async throws -> Countdown {
            try await store.extend(key, by: try DurationText.parse(duration))
        }
    }

    /// `countdown shorten KEY DURATION`.
    struct Shorten: ItemChange {
        static let configuration = CommandConfiguration(
            abstract: "Take time off a countdown; past zero it expires at once.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The key.") var key: String
        @Argument(help: "How much to take off.") var duration: String
        @OptionGroup var output: OutputOptions
        func change(_ store: CountdownStore) async throws -> Countdown {
            try await store.shorten(key, by: try DurationText.parse(duration))
        }
    }
}
