import Foundation
import GRDB
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

/// Concurrency at scale, as a shell user meets it: four loops of `countdown start`, two
/// `countdown run` with named consumers, loops of `list` and `show`, and forced checkpoints, all
/// on one file that none of them has created yet. No invocation may fail, every start must be
/// there, and every expiry must reach each consumer exactly once.
///
/// Size: `COUNTDOWN_CLI_STARTS` starts per writer loop (40 in CI; the long run uses 500: 2,000 starts).
extension RealProcesses {
@Suite("CLI concurrency", .enabled(if: FileManager.default.isExecutableFile(atPath: countdownBinary.path)))
struct ConcurrencyTests {
    /// One writer loop: `start wW-I` with a duration due within seconds (two in three) or in an hour.
    static let writerScript = #"""
        bin=$0; db=$1; w=$2; n=$3; i=0
        while [ $i -lt $n ]; do
            i=$((i + 1))
            case $((i % 3)) in
                0) d=1h ;;
                1) d=$((200 + i * 37 % 1500))ms ;;
                *) d=$((300 + i * 53 % 2500))ms ;;
            esac
            if err=$("$bin" --db "$db" start "w$w-$i" "$d" 2>&1 >/dev/null); then echo "ok w$w-$i $d"; else echo "FAIL start w$w-$i: $err"; fi
        done
        """#

    /// One reader loop, until the file `stop` exists: `list` (table and JSON) and `show` of a key
    /// that may not exist yet (not found, exit status 66, is an answer, not a failure).
    static let readerScript = #"""
        bin=$0; db=$1; stop=$2; n=0
        while [ ! -e "$stop" ]; do
            n=$((n + 1))
            if ! err=$("$bin" --db "$db" list --json 2>&1 >/dev/null); then echo "FAIL list --json: $err"; fi
            if ! err=$("$bin" --db "$db" list --state all 2>&1 >/dev/null); then echo "FAIL list: $err"; fi
            err=$("$bin" --db "$db" show w1-1 2>&1 >/dev/null); status=$?
            if [ $status -ne 0 ] && [ $status -ne 66 ]; then echo "FAIL show ($status): $err"; fi
            echo "read $n"
        done
        """#

    @Test("4 CLI writer loops, 2 `countdown run`, list/show readers and checkpoints on a new file: 0 errors, every start present, each expiry delivered once per consumer")
    func cliAtScale() async throws {
        let perWriter = suiteSize("COUNTDOWN_CLI_STARTS", ci: 40)
        let folder = try TemporaryFolder()
        let path = folder.path("c.sqlite")
        let stop = folder.path("stop")
        let sh = URL(fileURLWithPath: "/bin/sh")
        let runs = try ["c1", "c2"].map { try HelperProcess(["--db", path, "run", "--consumer", $0], executable: countdownBinary) }
        let writers = try (1...4).map {
            try HelperProcess(["-c", Self.writerScript, countdownBinary.path, path, String($0), String(perWriter)], executable: sh)
        }
        let readers = try (1...2).map { _ in
            try HelperProcess(["-c", Self.readerScript, countdownBinary.path, path, stop], executable: sh)
        }

        // Checkpoints from a connection of this process, the kind that waits for every reader
        // and truncates the WAL, beside the runs' own checkpointers.
        let checkpoints = Task {
            var count = 0
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(150))
                guard let queue = try? readWrite(path) else { continue }
                if (try? await queue.writeWithoutTransaction({ db in try db.checkpoint(.truncate) })) != nil { count += 1 }
                try? queue.close()
            }
            return count
        }

        var starts: [(key: String, expires: Bool)] = []
        var failures: [String] = []
        for writer in writers {
            for line in try await writer.waitForExit(seconds: Double(60 + perWriter)) {
                let fields = line.split(separator: " ")
                if fields.first == "ok", fields.count == 3 { starts.append((String(fields[1]), fields[2].hasSuffix("ms"))) }
                if line.hasPrefix("FAIL") { failures.append(line) }
            }
        }
        _ = FileManager.default.createFile(atPath: stop, contents: nil)
        var reads = 0
        for reader in readers {
            for line in try await reader.waitForExit(seconds: 60) {
                if line.hasPrefix("read") { reads += 1 }
                if line.hasPrefix("FAIL") { failures.append(line) }
            }
        }
        checkpoints.cancel()
        let checkpointsRun = await checkpoints.value
        #expect(failures.isEmpty, "\(failures.count) CLI invocations failed: \(failures.prefix(5))")
        #expect(starts.count == 4 * perWriter, "every start was acknowledged")

        let expiring = Set(starts.filter(\.expires).map(\.key))
        let reader = try readOnly(path)
        try await eventually("every short countdown expired and both consumers caught up", limit: 60) {
            try expiredAndDelivered(reader, count: expiring.count, consumers: ["c1", "c2"])
        }
        for run in runs { run.kill(SIGTERM) }
        for (name, run) in zip(["c1", "c2"], runs) {
            let keys = await run.finish().compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["key"] as? String
            }
            #expect(run.process.terminationStatus == 0, "run --consumer \(name) stops gracefully")
            #expect(keys.count == expiring.count && Set(keys) == expiring, "\(name) printed \(keys.count) expiries, \(Set(keys).count) distinct, of \(expiring.count)")
        }
        let (stored, integrity) = try await reader.read { db in
            (Set(try String.fetchAll(db, sql: "SELECT key FROM countdowns")), try String.fetchAll(db, sql: "PRAGMA integrity_check"))
        }
        try reader.close()
        #expect(stored == Set(starts.map(\.key)), "every start is present")
        #expect(integrity == ["ok"])
        let report = """
            CLI concurrency: \(starts.count) starts by 4 writer loops + \(reads * 3) list/show by 2 readers beside 2 `countdown run` \
            and \(checkpointsRun) forced checkpoints: \(starts.count + reads * 3) invocations, \(failures.count) errors, \
            \(expiring.count) expiries, each delivered once to each of 2 consumers
            """
        print(report)
        if let file = ProcessInfo.processInfo.environment["COUNTDOWN_RELIABILITY_REPORT"] { try? (report + "\n").appendLine(to: file) }
    }
}
}

/// A read-write connection with a busy timeout, for checkpoints beside the processes; `nil`
/// until the store has created its file.
func readWrite(_ path: String) throws -> DatabaseQueue? {
    guard (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int).flatMap({ $0 }) ?? 0 > 0 else { return nil }
    var configuration = GRDB.Configuration()
    configuration.busyMode = .timeout(10)
    return try DatabaseQueue(path: path, configuration: configuration)
}
