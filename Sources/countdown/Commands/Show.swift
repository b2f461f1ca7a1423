import ArgumentParser
import CountdownStore
import Foundation

extension CountdownCommand {
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
}
