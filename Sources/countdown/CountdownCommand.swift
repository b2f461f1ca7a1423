import ArgumentParser
import CountdownStore
import Foundation
import Logging

/// `countdown`: many named countdowns kept in SQLite.
struct CountdownCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "countdown",
        abstract: "Many named countdowns, kept in SQLite so they survive restarts, crashes and clock changes.",
        discussion: """
            The database is --db PATH, else $COUNTDOWN_DB, else \
            $XDG_DATA_HOME/countdown/countdowns.sqlite (~/.local/share/countdown/countdowns.sqlite).

            Durations: 90s, 15m, 1h30m, 2d, 250ms, ISO-8601 PT15M, or plain seconds.

            Exit status: 0 success, 64 invalid input, 65 conflict (the item's state refuses the \
            operation), 66 not found, 74 storage failure (unreadable, foreign or newer database, \
            disk full, I/O error), 75 still cooling down (cooldown).
            """,
        version: ToolVersion.text,
        subcommands: commands)

    /// The subcommands, in the order of the help: the item actions' among them.
    private static var commands: [any ParsableCommand.Type] {
        var commands: [any ParsableCommand.Type] = [
            Start.self, StartStopwatch.self, Cooldown.self, Debounce.self, Show.self, List.self,
        ]
        commands += itemActionCommands.map { $0 as any ParsableCommand.Type }
        commands += [Run.self, Watch.self, Serve.self, Calibrate.self, Prune.self, Doctor.self, Demo.self]
        return commands
    }
}

/// The entry point: parses, runs, and turns every failure into one line on stderr and an exit status.
@main
enum Main {
    static func main() async {
        // Every logger of the process (the libraries' too) writes through the tool's handler, on stderr.
        LoggingSystem.bootstrap { label in ToolLogHandler(label: label) }
        do {
            var command = try CountdownCommand.parseAsRoot(
                globalOptionsAfterSubcommand(Array(CommandLine.arguments.dropFirst())))
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch let error as CountdownError {
            fail(toolMessage(error), status: ExitStatus.of(error))
        } catch let exit as ExitCode {
            Foundation.exit(exit.rawValue)
        } catch {
            let status = CountdownCommand.exitCode(for: error)
            if status == .success {
                CountdownCommand.exit(withError: error)  // --help, --version: printed in full
            }
            let message =
                CountdownCommand.message(for: error)
                .split(separator: "\n").first.map(String.init) ?? "\(error)"
            fail(message.hasPrefix("Error: ") ? String(message.dropFirst(7)) : message, status: status.rawValue)
        }
    }

    /// `--db PATH`, `--log-format F` and `--log-level L` are global: accepted before the
    /// subcommand name too (`countdown --db x list`), where they are moved behind the name for
    /// the subcommand to parse. A negative number
    /// (`-5s`) is an argument, not an option: it is passed after `--` so that the duration
    /// parser can refuse it by name.
    static func globalOptionsAfterSubcommand(_ arguments: [String]) -> [String] {
        let globalOptions = ["--db", "--log-format", "--log-level"]
        var leading: [String] = []
        var rest = arguments[...]
        while let first = rest.first {
            if globalOptions.contains(first), rest.count >= 2 {
                leading += rest.prefix(2)
                rest = rest.dropFirst(2)
            } else if globalOptions.contains(where: { first.hasPrefix($0 + "=") }) {
                leading.append(first)
                rest = rest.dropFirst()
            } else {
                break
            }
        }
        var reordered = Array(rest)
        if let subcommand = reordered.first {
            let known = CountdownCommand.configuration.subcommands.map { $0._commandName }
            // Before an unknown word, the global options only hide the real problem.
            if known.contains(subcommand) { reordered.insert(contentsOf: leading, at: 1) }
        }
        guard !reordered.contains("--") else { return reordered }
        let negative = reordered.filter {
            $0.count > 1 && $0.hasPrefix("-") && ($0.dropFirst().first?.isNumber ?? false)
        }
        guard !negative.isEmpty else { return reordered }
        return reordered.filter { !negative.contains($0) } + ["--"] + negative
    }

    /// The library's message, with its hint in the tool's words: the option to give.
    static func toolMessage(_ error: CountdownError) -> String {
        error.message(hint: { hint in
            switch hint {
            case .startWhenActive(.replace): "use countdown start --replace"
            case .startWhenActive: nil
            case .calibrateWithForce: "calibrate with --force"
            }
        })
    }

    static func fail(_ message: String, status: Int32) -> Never {
        FileHandle.standardError.write(Data("countdown: \(TerminalText.safe(message))\n".utf8))
        exit(status)
    }
}

/// The documented exit statuses.
enum ExitStatus {
    static let invalidInput: Int32 = 64
    static let conflict: Int32 = 65
    static let notFound: Int32 = 66
    static let storage: Int32 = 74
    /// `cooldown` found the key cooling down: not an error, the answer "not yet" (EX_TEMPFAIL).
    static let coolingDown: Int32 = 75

    static func of(_ error: CountdownError) -> Int32 {
        switch error.code.category {
        case .invalidInput: invalidInput
        case .conflict: conflict
        case .notFound: notFound
        case .storage: storage
        }
    }
}
