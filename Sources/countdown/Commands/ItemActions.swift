import ArgumentParser
import CountdownStore
import Foundation

/// A command of one ``CountdownAction``: `countdown NAME KEY`, or `countdown NAME KEY DURATION`
/// for an action that takes a duration. It runs the action and prints the item after it.
protocol ItemActionCommand: AsyncParsableCommand {
    /// The action the command runs; its name is the command's.
    static var action: CountdownAction { get }
    var global: GlobalOptions { get }
    var output: OutputOptions { get }
    var key: String { get }
    /// The duration argument as given, for an action that takes one; `nil` otherwise.
    var durationText: String? { get }
}

extension ItemActionCommand {
    /// The command's configuration: its name is its action's.
    static func actionConfiguration(abstract: String) -> CommandConfiguration {
        CommandConfiguration(commandName: action.name, abstract: abstract)
    }

    var durationText: String? { nil }

    func run() async throws {
        let item = try await withStore(global) { store in
            try await Self.action.perform(on: store, key: key, by: try durationText.map(DurationText.parse))
        }
        report(item, json: output.json)
    }
}

extension CountdownCommand {
    /// Every command of a ``CountdownAction``, in the order of the tool's help.
    static var itemActionCommands: [any ItemActionCommand.Type] {
        [Pause.self, Resume.self, Cancel.self, Restart.self, Remove.self, Extend.self, Shorten.self]
    }

    /// `countdown pause KEY`.
    struct Pause: ItemActionCommand {
        static let action = CountdownAction.pause
        static let configuration = actionConfiguration(abstract: "Pause a running countdown.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The key.") var key: String
        @OptionGroup var output: OutputOptions
    }

    /// `countdown resume KEY`.
    struct Resume: ItemActionCommand {
        static let action = CountdownAction.resume
        static let configuration = actionConfiguration(abstract: "Resume a paused countdown.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The key.") var key: String
        @OptionGroup var output: OutputOptions
    }

    /// `countdown cancel KEY`.
    struct Cancel: ItemActionCommand {
        static let action = CountdownAction.cancel
        static let configuration = actionConfiguration(abstract: "Cancel a running or paused countdown.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The key.") var key: String
        @OptionGroup var output: OutputOptions
    }

    /// `countdown restart KEY`.
    struct Restart: ItemActionCommand {
        static let action = CountdownAction.restart
        static let configuration = actionConfiguration(abstract: "Start a countdown again from zero.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The key.") var key: String
        @OptionGroup var output: OutputOptions
    }

    /// `countdown remove KEY`.
    struct Remove: ItemActionCommand {
        static let action = CountdownAction.remove
        static let configuration = actionConfiguration(abstract: "Delete a countdown, whatever its state.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The key.") var key: String
        @OptionGroup var output: OutputOptions
    }

    /// `countdown extend KEY DURATION`.
    struct Extend: ItemActionCommand {
        static let action = CountdownAction.extend
        static let configuration = actionConfiguration(abstract: "Add time to a countdown.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The key.") var key: String
        @Argument(help: "How much to add.") var duration: String
        @OptionGroup var output: OutputOptions
        var durationText: String? { duration }
    }

    /// `countdown shorten KEY DURATION`.
    struct Shorten: ItemActionCommand {
        static let action = CountdownAction.shorten
        static let configuration = actionConfiguration(
            abstract: "Take time off a countdown; past zero it expires at once.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The key.") var key: String
        @Argument(help: "How much to take off.") var duration: String
        @OptionGroup var output: OutputOptions
        var durationText: String? { duration }
    }
}
