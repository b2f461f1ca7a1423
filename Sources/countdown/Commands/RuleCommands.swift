import ArgumentParser
import CountdownStore
import Foundation

extension CountdownCommand {
    /// `countdown cooldown KEY DURATION`: go ahead at most once per duration.
    struct Cooldown: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start a cooldown unless one is running: exit 0 to go ahead, 75 while it cools down.",
            discussion: """
                When the key is not cooling down, its cooldown starts now and the exit status is 0. While it \
                runs (or is paused), nothing changes: the time left is printed and the exit status is 75, so \
                that `countdown cooldown nightly-export 1h && ./export.sh` runs the export at most once an hour. \
                Callers racing for one key get exactly one 0.
                """)

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The cooldown's unique key.") var key: String
        @Argument(help: "How long it lasts: 90s, 15m, 1h30m, 2d, 250ms, PT15M, or seconds.") var duration: String
        @Option(help: "A group to file it under.") var group: String?
        @Option(help: "wall (keeps counting while nothing runs) or active (counts only while a host runs).")
        var policy: CountdownPolicy = .wall
        @Option(help: "Text to keep with it and get back with its expiry.") var payload: String?
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let length = try DurationText.parse(duration)
            let outcome = try await withStore(global) { store in
                try await store.cooldown(
                    key, duration: length, group: group, policy: policy, payload: payload.map(CountdownPayload.text))
            }
            print(output.json ? outcome.json.text : outcome.line)
            if !outcome.isAllowed { throw ExitCode(ExitStatus.coolingDown) }
        }
    }

    /// `countdown debounce KEY QUIET --max-wait DURATION`: one expiry per burst of calls.
    struct Debounce: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start a countdown, or move its deadline to QUIET from now, never past --max-wait.",
            discussion: """
                The first call of a burst starts a countdown of QUIET; each call while it is active moves its \
                deadline to QUIET from now, but never later than --max-wait after the burst's first call. It \
                expires once per burst, when no call came for QUIET or at its maximum wait.
                """)

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The countdown's unique key.") var key: String
        @Argument(help: "How long after the last call it expires: 90s, 15m, 1h30m, 2d, 250ms, PT15M, or seconds.")
        var quiet: String
        @Option(
            name: .customLong("max-wait"),
            help: "How long after the burst's first call it expires at the latest; at least QUIET.")
        var maxWait: String
        @Option(help: "A group to file it under.") var group: String?
        @Option(help: "wall (keeps counting while nothing runs) or active (counts only while a host runs).")
        var policy: CountdownPolicy = .wall
        @Option(help: "Text to keep with it and get back with its expiry; the last call's wins.") var payload: String?
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let quietPeriod = try DurationText.parse(quiet)
            let longest = try DurationText.parse(maxWait)
            let item = try await withStore(global) { store in
                try await store.debounce(
                    key, quiet: quietPeriod, maxWait: longest, group: group, policy: policy,
                    payload: payload.map(CountdownPayload.text))
            }
            report(item, json: output.json)
        }
    }
}

extension CooldownOutcome {
    /// The object `cooldown --json` prints: whether the caller may go ahead, the time left while
    /// it may not, and the cooldown as `show --json` prints it.
    var json: JSON {
        switch self {
        case .allowed(let countdown):
            .object([("allowed", .bool(true)), ("countdown", countdown.json)])
        case .coolingDown(let remaining, let endsAt, let countdown):
            .object([
                ("allowed", .bool(false)), ("remaining_ms", .duration(remaining)), ("ends_at", .instant(endsAt)),
                ("countdown", countdown.json),
            ])
        }
    }

    /// One line for people: the cooldown started, or how long it has left.
    var line: String {
        switch self {
        case .allowed(let countdown):
            let length = countdown.duration.map(DurationText.format) ?? "-"
            let end = countdown.deadlineAt.map { "ends at \(StoreTime.iso8601($0))" } ?? Self.noEnd(countdown)
            return "\(TerminalText.safe(countdown.key)): cooldown of \(length) started, \(end)"
        case .coolingDown(let remaining, let endsAt, let countdown):
            let end = endsAt.map { "until \(StoreTime.iso8601($0))" } ?? Self.noEnd(countdown)
            let left = DurationText.format(remaining)
            return "cooling down: '\(TerminalText.safe(countdown.key))' has \(left) left (\(end))"
        }
    }

    /// Why a cooldown has no end instant: it is paused, or active with no ticker running.
    private static func noEnd(_ countdown: Countdown) -> String {
        countdown.state == .paused ? "paused" : "an active cooldown counts only while a ticker runs"
    }
}
