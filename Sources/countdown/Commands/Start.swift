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
}
