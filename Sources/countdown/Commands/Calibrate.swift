import ArgumentParser
import CountdownStore
import Foundation

extension CountdownCommand {
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
}

/// ISO-8601 with or without fractional seconds.
func parseISO8601(_ text: String) -> Date? {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    if let date = formatter.date(from: text) { return date }
    formatter.formatOptions = [.withInternetDateTime]
    return formatter.date(from: text)
}
