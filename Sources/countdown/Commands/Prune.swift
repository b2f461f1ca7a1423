import ArgumentParser
import CountdownStore
import Foundation

extension CountdownCommand {
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
