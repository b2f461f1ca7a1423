import CountdownStore
import Foundation
import Logging
import ServiceLifecycle

// A host app in miniature: the countdown ticker runs in a ServiceGroup beside the host's own
// services, here one that prints every expiry as a JSON line and acknowledges it.
//
//     swift run CountdownHostExample countdowns.sqlite
//
// SIGTERM or SIGINT stops it gracefully: the printer finishes its line, the ticker writes a
// final heartbeat and frees the store's lease for another process.

/// Prints the store's expiries, one JSON line each, as the named consumer "host-example".
struct ExpiryPrinter: Service {
    let store: CountdownStore

    func run() async throws {
        let consumer = try await store.consumer("host-example")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        for try await expiry in try await consumer.events(.expiries).cancelOnGracefulShutdown() {
            // The event's JSON is the line `countdown run` prints for it.
            FileHandle.standardOutput.write(try encoder.encode(expiry) + Data("\n".utf8))
            try await consumer.acknowledge(expiry)  // handled: never delivered again
        }
    }
}

let path = CommandLine.arguments.dropFirst().first ?? "countdowns.sqlite"
let logger = Logger(label: "countdown-host-example")
let store = try CountdownStore(path: path, configuration: .init(logger: logger))
let ticker = CountdownTicker(store: store)
let group = ServiceGroup(
    services: [ticker, ExpiryPrinter(store: store)],
    gracefulShutdownSignals: [.sigterm, .sigint],
    logger: logger)
try await group.run()
try await store.close()
