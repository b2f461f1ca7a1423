import Foundation
import GRDB
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

extension RealProcesses {
    /// Multi-process: four writer processes, the CLI and two running tickers on one file.
    /// Nothing crashes, so every expiry must reach each consumer exactly once.
    ///
    /// Size: `COUNTDOWN_MULTIPROCESS_ITEMS` per writer (150 in CI).
    @Suite("Multi-process", .enabled(if: FileManager.default.isExecutableFile(atPath: tortureHelper.path)))
    struct MultiProcessTests {
        @Test("Writers, the CLI and two tickers at once: no error, every write present, each expiry delivered exactly once per consumer")
        func everythingAtOnce() async throws {
            let perWriter = suiteSize("COUNTDOWN_MULTIPROCESS_ITEMS", ci: 150)
            let folder = try TemporaryFolder()
            let path = folder.path()
            _ = try CountdownStore(path: path)  // created once, so the processes race on writes, not on creation
            let alpha = try HelperProcess(["--db", path, "run", "--consumer", "alpha"], executable: countdownBinary)
            let beta = try HelperProcess(["--db", path, "run", "--consumer", "beta"], executable: countdownBinary)
            let writers = try (0..<4).map { try HelperProcess(["write", path, "w\($0)", String(perWriter)]) }

            var cliKeys: [String] = []
            var cliFailures: [String] = []
            for index in 0..<20 {
                let key = "cli-\(index)"
                let started = try HelperProcess.run(countdownBinary, ["--db", path, "start", key, "\(300 + index * 50)ms", "--group", "cli"])
                if started.status == 0 {
                    cliKeys.append(key)
                } else {
                    cliFailures.append(started.stderr)
                }
                let list = try HelperProcess.run(countdownBinary, ["--db", path, "list", "--json"])
                if list.status != 0 { cliFailures.append("list exited \(list.status): \(list.stderr)") }
            }
            for writer in writers {
                _ = try await writer.waitForExit(seconds: 120)
                #expect(writer.process.terminationStatus == 0, "a writer saw an error")
            }
            #expect(cliFailures.isEmpty, "\(cliFailures.prefix(3))")

            let total = 4 * perWriter + cliKeys.count
            let reader = try readOnly(path)
            try await eventually("everything expired and both consumers caught up", limit: 120) {
                try expiredAndDelivered(reader, count: total, consumers: ["alpha", "beta"])
            }
            alpha.kill(SIGTERM)
            beta.kill(SIGTERM)
            for (name, run) in [("alpha", alpha), ("beta", beta)] {
                let keys = await run.finish().compactMap { line in
                    (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["key"] as? String
                }
                #expect(run.process.terminationStatus == 0)
                #expect(keys.count == total, "\(name) printed \(keys.count) expiries of \(total)")
                #expect(Set(keys).count == keys.count, "\(name) printed an expiry twice")
            }
            let (items, expiries, integrity) = try await reader.read { db in
                (
                    try Int.fetchOne(db, sql: "SELECT count(*) FROM countdowns") ?? 0,
                    try Int.fetchOne(db, sql: "SELECT count(*) FROM countdown_events WHERE kind = 'expired'") ?? 0,
                    try String.fetchAll(db, sql: "PRAGMA integrity_check")
                )
            }
            #expect(items == total, "every write is present")
            #expect(expiries == total, "each countdown expired exactly once")
            #expect(integrity == ["ok"])
            let report = "multi-process suite: 4 writers × \(perWriter) + \(cliKeys.count) CLI starts + 20 CLI lists beside 2 tickers, \(total) expiries, each delivered once to each of 2 consumers, errors 0"
            print(report)
            if let file = ProcessInfo.processInfo.environment["COUNTDOWN_RELIABILITY_REPORT"] { try? (report + "\n").appendLine(to: file) }
        }
    }
}
