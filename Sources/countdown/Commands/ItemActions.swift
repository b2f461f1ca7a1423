import ArgumentParser
import CountdownStore
import Foundation

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
