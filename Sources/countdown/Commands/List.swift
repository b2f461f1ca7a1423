import ArgumentParser
import CountdownStore
import Foundation

extension CountdownCommand {
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
}
