import ArgumentParser
import CountdownStore
import Foundation

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
            disk full, I/O error).
            """,
        subcommands: [
            Start.self, StartStopwatch.self, Show.self, List.self,
            Pause.self, Resume.self, Cancel.self, Restart.self, Remove.self, Extend.self, Shorten.self,
            Run.self, Watch.self, Calibrate.self, Prune.self, Doctor.self, Demo.self,
        ])
}

/// The entry point: parses, runs, and turns every failure into one line on stderr and an exit status.
@main
enum Main {
    static func main() async {
        do {
            var command = try CountdownCommand.parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch let error as CountdownError {
            fail(error.message, status: ExitStatus.of(error))
        } catch let exit as ExitCode {
            Foundation.exit(exit.rawValue)
        } catch {
            let status = CountdownCommand.exitCode(for: error)
            if status == .success {
                CountdownCommand.exit(withError: error)  // --help, --version: printed in full
            }
            let message = CountdownCommand.message(for: error)
                .split(separator: "\n").first.map(String.init) ?? "\(error)"
            fail(message.hasPrefix("Error: ") ? String(message.dropFirst(7)) : message, status: status.rawValue)
        }
    }

    static func fail(_ message: String, status: Int32) -> Never {
        FileHandle.standardError.write(Data("countdown: \(message)\n".utf8))
        exit(status)
    }
}

/// The documented exit statuses.
enum ExitStatus {
    static let invalidInput: Int32 = 64
    static let conflict: Int32 = 65
    static let notFound: Int32 = 66
    static let storage: Int32 = 74

    static func of(_ error: CountdownError) -> Int32 {
        switch error.code.category {
        case .invalidInput: invalidInput
        case .conflict: conflict
        case .notFound: notFound
        case .storage: storage
        }
    }
}
