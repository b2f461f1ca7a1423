import Foundation
import GRDB
import Testing

@testable import CountdownStore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension RealProcesses {
/// End-to-end tests of the `countdown` tool's contract (SPEC section 6), on the built binary.
@Suite("countdown tool", .enabled(if: FileManager.default.isExecutableFile(atPath: countdownBinary.path)))
struct ToolTests {
    static let binary = countdownBinary

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
        var json: [String: Any]? { (try? JSONSerialization.jsonObject(with: Data(stdout.utf8))) as? [String: Any] }
        var jsonArray: [[String: Any]]? { (try? JSONSerialization.jsonObject(with: Data(stdout.utf8))) as? [[String: Any]] }
    }

    let folder: TemporaryFolder
    var db: String { folder.path("tool.sqlite") }

    init() throws {
        folder = try TemporaryFolder()
    }

    /// Runs the tool to completion.
    @discardableResult
    func countdown(_ arguments: [String], database: Bool = true, environment: [String: String] = [:], binary: URL = ToolTests.binary) throws -> Result {
        var env = ["XDG_DATA_HOME": folder.path("xdg")]
        for (key, value) in environment { env[key] = value }
        let ran = try HelperProcess.run(binary, database ? ["--db", db] + arguments : arguments, environment: env)
        return Result(status: ran.status, stdout: ran.stdout, stderr: ran.stderr)
    }

    /// Every row of the countdown tables, read without writing.
    func tables() throws -> [String] {
        var configuration = GRDB.Configuration()
        configuration.readonly = true
        let queue = try DatabaseQueue(path: db, configuration: configuration)
        defer { try? queue.close() }
        return try queue.read { db in
            try ["countdowns", "countdown_clock", "countdown_lease", "countdown_events", "countdown_consumers"].flatMap { table in
                try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY rowid").map { "\(table) \($0)" }
            }
        }
    }

    static let fields = ["key", "group", "kind", "policy", "state", "duration_ms", "elapsed_ms", "remaining_ms",
                         "started_at", "deadline_at", "expired_at", "generation", "payload"]

    @Test("show --json prints exactly the contract's fields, with ISO-8601 instants")
    func showJSONFields() throws {
        let started = try countdown(["start", "order-1042", "15m", "--group", "payments", "--payload", "{\"order\":1042}", "--json"])
        #expect(started.status == 0, "\(started.stderr)")
        let shown = try countdown(["show", "order-1042", "--json"])
        #expect(shown.status == 0)
        #expect(shown.stdout.split(separator: "\n").count == 1)
        let object = try #require(shown.json)
        #expect(Set(object.keys) == Set(Self.fields))
        #expect(Set(try #require(started.json).keys) == Set(Self.fields), "a change prints the same object as show")
        #expect(object["key"] as? String == "order-1042")
        #expect(object["group"] as? String == "payments")
        #expect(object["kind"] as? String == "countdown")
        #expect(object["policy"] as? String == "wall")
        #expect(object["state"] as? String == "running")
        #expect(object["duration_ms"] as? Int == 900_000)
        #expect((object["remaining_ms"] as? Int).map { $0 <= 900_000 && $0 > 890_000 } == true)
        #expect((object["elapsed_ms"] as? Int).map { $0 >= 0 } == true)
        #expect(object["generation"] as? Int == 1)
        #expect(object["payload"] as? String == "{\"order\":1042}")
        #expect(object["expired_at"] is NSNull)
        let iso = #/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/#
        #expect((object["started_at"] as? String)?.wholeMatch(of: iso) != nil)
        #expect((object["deadline_at"] as? String)?.wholeMatch(of: iso) != nil)

        let watch = try #require(try countdown(["stopwatch", "build", "--json"]).json)
        #expect(watch["kind"] as? String == "stopwatch")
        #expect(watch["duration_ms"] is NSNull && watch["remaining_ms"] is NSNull && watch["deadline_at"] is NSNull)
        #expect(watch["group"] is NSNull && watch["payload"] is NSNull)
    }

    @Test("Every changing subcommand prints the item; list filters, sorts and limits")
    func everySubcommand() throws {
        #expect(try countdown(["start", "a", "90s"]).status == 0)
        #expect(try countdown(["start", "b", "PT15M", "--policy", "active", "--group", "g"]).status == 0)
        #expect(try countdown(["start", "c", "1h30m", "--group", "g"]).status == 0)
        #expect(try countdown(["start", "d", "250ms"]).status == 0)
        #expect(try countdown(["start", "e", "2d"]).status == 0)
        #expect(try countdown(["start", "f", "45"]).status == 0)
        #expect(try countdown(["pause", "c", "--json"]).json?["state"] as? String == "paused")
        #expect(try countdown(["resume", "c", "--json"]).json?["state"] as? String == "running")
        #expect(try countdown(["extend", "a", "30s", "--json"]).json?["duration_ms"] as? Int == 120_000)
        #expect(try countdown(["shorten", "a", "60s", "--json"]).json?["duration_ms"] as? Int == 60_000)
        let over = try #require(try countdown(["shorten", "e", "3d", "--json"]).json)
        #expect(over["state"] as? String == "expired" && over["remaining_ms"] as? Int == 0)
        #expect(try countdown(["cancel", "f", "--json"]).json?["state"] as? String == "cancelled")
        #expect(try countdown(["restart", "f", "--json"]).json?["generation"] as? Int == 2)
        #expect(try countdown(["remove", "d", "--json"]).json?["key"] as? String == "d")
        #expect(try countdown(["show", "d"]).status == 66)
        let text = try countdown(["pause", "b"])
        #expect(text.status == 0 && text.stdout.contains("b: paused"))

        let active = try #require(try countdown(["list", "--json"]).jsonArray)
        #expect(active.map { $0["key"] as? String } == ["f", "a", "b", "c"], "soonest first")
        #expect(Set(active[0].keys) == Set(Self.fields))
        #expect(try countdown(["list", "--state", "paused", "--json"]).jsonArray?.map { $0["key"] as? String } == ["b"])
        #expect(try countdown(["list", "--state", "running", "--json"]).jsonArray?.count == 3)
        #expect(try countdown(["list", "--state", "expired", "--json"]).jsonArray?.map { $0["key"] as? String } == ["e"])
        #expect(try countdown(["list", "--state", "cancelled", "--json"]).jsonArray?.isEmpty == true)
        #expect(try countdown(["list", "--state", "all", "--json"]).jsonArray?.count == 5)
        let grouped = try countdown(["list", "--group", "g", "--json"]).jsonArray?.map { $0["key"] as? String }
        #expect(grouped == ["b", "c"])
        #expect(try countdown(["list", "--limit", "2", "--json"]).jsonArray?.count == 2)
        let table = try countdown(["list"])
        #expect(table.stdout.hasPrefix("KEY") && table.stdout.contains("running"))

        let refused = try countdown(["calibrate", "2030-01-01T00:00:00.000Z"])
        #expect(refused.status == 64 && refused.stderr.contains("ahead of the store clock") && refused.stderr.contains("--force"))
        let backwards = try countdown(["calibrate", "1999-01-01T00:00:00Z"])
        #expect(backwards.status == 64 && backwards.stderr.contains("behind the store clock") && backwards.stderr.contains("half speed"))
        let calibrated = try countdown(["calibrate", "--force", "2030-01-01T00:00:00.000Z"])
        #expect(calibrated.status == 0 && calibrated.stdout.contains("2030-01-01T00:00:00"))
        #expect(try countdown(["prune", "--older-than", "30d"]).stdout.contains("pruned"))
        let doctor = try #require(try countdown(["doctor", "--json"]).json)
        #expect(doctor["ok"] as? Bool == true)
        #expect((doctor["clock"] as? [String: Any])?["calibration_offset_ms"] as? Int != 0)
        #expect((doctor["integrity"] as? [String]) == ["ok"])
        #expect(try countdown(["doctor"]).stdout.contains("calibration"))
        let watched = try countdown(["watch"])
        #expect(watched.status == 0 && watched.stdout.contains("[") && watched.stdout.split(separator: "\n").count == 4)
    }

    @Test("Bad input gives its documented exit status, one line naming the value, and changes nothing")
    func badInput() throws {
        try countdown(["start", "taken", "5m"])
        try countdown(["stopwatch", "watch"])
        let before = try tables()
        let cases: [([String], Int32, String)] = [
            (["start", "", "5m"], 64, "''"),
            (["start", String(repeating: "k", count: 257), "5m"], 64, "257 bytes"),
            (["start", "ctl\u{1}x", "5m"], 64, "U+0001"),
            (["start", "x", "nan"], 64, "'nan'"),
            (["start", "x", "-5s"], 64, "'-5s'"),
            (["start", "x", "0"], 64, "'0'"),
            (["start", "x", "inf"], 64, "'inf'"),
            (["start", "x", "99999999999999999999"], 64, "'99999999999999999999'"),
            (["start", "x", "5m", "--group", String(repeating: "g", count: 129)], 64, "129 bytes"),
            (["start", "x", "5m", "--policy", "sideways"], 64, "'sideways'"),
            (["start", "x", "5m", "--payload", String(repeating: "p", count: 65_537)], 64, "65537 bytes"),
            (["list", "--state", "lost"], 64, "'lost'"),
            (["list", "--limit", "0"], 64, "0"),
            (["calibrate", "yesterday"], 64, "'yesterday'"),
            (["prune", "--older-than", "soon"], 64, "'soon'"),
            (["start", "taken", "5m"], 65, "'taken'"),
            (["resume", "taken"], 65, "'taken'"),
            (["extend", "watch", "1m"], 65, "'watch'"),
            (["show", "ghost"], 66, "'ghost'"),
            (["pause", "ghost"], 66, "'ghost'"),
            (["frobnicate"], 64, "frobnicate"),
        ]
        for (arguments, status, named) in cases {
            let result = try countdown(arguments)
            #expect(result.status == status, "\(arguments.prefix(3)): \(result.stderr)")
            #expect(result.stderr.hasPrefix("countdown: ") && result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
            #expect(result.stderr.contains(named), "\(arguments.prefix(3)) names \(named): \(result.stderr)")
            #expect(!result.stderr.contains("Fatal error"))
        }
        #expect(try tables() == before, "nothing was written")

        try Data("just some text\n".utf8).write(to: URL(fileURLWithPath: folder.path("notes.txt")))
        let foreign = try countdown(["--db", folder.path("notes.txt"), "list"], database: false)
        #expect(foreign.status == 74 && foreign.stderr.contains("not an SQLite database"))
        #expect(try String(contentsOfFile: folder.path("notes.txt"), encoding: .utf8) == "just some text\n")
        let doctor = try countdown(["--db", folder.path("notes.txt"), "doctor", "--json"], database: false)
        #expect(doctor.status == 74 && doctor.json?["ok"] as? Bool == false)
    }

    @Test("--db, then $COUNTDOWN_DB, then $XDG_DATA_HOME/countdown/countdowns.sqlite; new files are 0600")
    func databasePathRule() throws {
        let viaEnvironment = folder.path("env.sqlite")
        #expect(try countdown(["start", "e", "1m"], database: false, environment: ["COUNTDOWN_DB": viaEnvironment]).status == 0)
        #expect(FileManager.default.fileExists(atPath: viaEnvironment))
        #expect(try countdown(["start", "x", "1m"], database: false).status == 0)
        let xdg = folder.path("xdg/countdown/countdowns.sqlite")
        #expect(FileManager.default.fileExists(atPath: xdg))
        #expect(try countdown(["start", "d", "1m"]).status == 0)
        for path in [viaEnvironment, xdg, db] {
            let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber
            #expect(mode?.intValue == 0o600, "\(path)")
        }
    }

    @Test("The binary copied alone to an empty folder works")
    func binaryWorksAlone() throws {
        let alone = folder.url.appendingPathComponent("alone", isDirectory: true)
        try FileManager.default.createDirectory(at: alone, withIntermediateDirectories: true)
        let copy = alone.appendingPathComponent("countdown")
        try FileManager.default.copyItem(at: Self.binary, to: copy)
        let started = try countdown(["start", "solo", "1m", "--json"], binary: copy)
        #expect(started.status == 0 && started.json?["key"] as? String == "solo", "\(started.stderr)")
        #expect(try countdown(["doctor", "--json"], binary: copy).json?["ok"] as? Bool == true)
    }

    @Test("demo starts countdowns, ends by itself, and carries on across a restart")
    func demoCarriesOn() throws {
        let first = try countdown(["demo", "--seconds", "1"])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("Started") && first.stdout.contains("otp:alice"))
        let second = try countdown(["demo", "--seconds", "1"])
        #expect(second.status == 0)
        #expect(second.stdout.contains("carried on across the restart"))
    }

    func expiredCount() throws -> Int {
        let queue = try DatabaseQueue(path: db)
        defer { try? queue.close() }
        return try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM countdowns WHERE state = 'expired'") ?? 0 }
    }

    /// Starts `countdown run` in the background.
    func startRun(_ arguments: [String]) throws -> HelperProcess {
        try HelperProcess(["--db", db, "run"] + arguments, executable: Self.binary)
    }

    /// Stops `run` with SIGTERM; returns its exit status and the JSON lines it printed.
    func stop(_ run: HelperProcess) -> (status: Int32, lines: [[String: Any]]) {
        run.kill(SIGTERM)
        let lines = run.finish().compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
        return (run.process.terminationStatus, lines)
    }

    @Test("run --consumer prints one JSON line per expiry and resumes across a restart without loss or repeats")
    func runResumesAcrossRestarts() async throws {
        for index in 0..<5 { try countdown(["start", "early-\(index)", "\(100 + index * 10)ms", "--payload", "p\(index)"]) }
        let first = try startRun(["--consumer", "tests"])
        try await eventually("the first batch expired") {
            try self.expiredCount() == 5
        }
        try await Task.sleep(for: .milliseconds(300))  // let the lines be written and acknowledged
        let (firstStatus, firstLines) = stop(first)
        #expect(firstStatus == 0, "SIGTERM stops run gracefully")
        #expect(firstLines.count == 5)
        let line = try #require(firstLines.first)
        #expect(Set(line.keys) == ["event", "key", "group", "generation", "deadline_at", "fired_at", "late_ms", "payload"])
        #expect(line["event"] as? String == "expired" && line["payload"] as? String == "p0")
        #expect((line["late_ms"] as? Int).map { $0 >= 0 } == true)

        // While no run is going, more come due; the next run catches up, and repeats nothing.
        for index in 0..<3 { try countdown(["start", "late-\(index)", "50ms"]) }
        try await Task.sleep(for: .milliseconds(200))
        let second = try startRun(["--consumer", "tests"])
        try await eventually("the second batch expired") {
            try self.expiredCount() == 8
        }
        try await Task.sleep(for: .milliseconds(300))
        let secondKeys = stop(second).lines.compactMap { $0["key"] as? String }
        #expect(secondKeys.sorted() == ["late-0", "late-1", "late-2"])
        let lease = try await DatabaseQueue(path: db).read { db in try String.fetchOne(db, sql: "SELECT holder FROM countdown_lease") }
        #expect(lease == nil, "the final heartbeat freed the lease")
    }

    @Test("run --exec acknowledges only after the command succeeds, with the expiry in its environment")
    func runExec() async throws {
        let marker = folder.path("exec.log")
        try countdown(["start", "job", "100ms", "--group", "g", "--payload", "hello"])
        let run = try startRun(["--consumer", "exec", "--exec", "echo \"$COUNTDOWN_KEY $COUNTDOWN_GROUP $COUNTDOWN_PAYLOAD $COUNTDOWN_LATE_MS\" >> \(marker)"])
        try await eventually("the command ran") { FileManager.default.fileExists(atPath: marker) }
        try await Task.sleep(for: .milliseconds(300))
        _ = stop(run)
        let logged = try String(contentsOfFile: marker, encoding: .utf8)
        #expect(logged.hasPrefix("job g hello "))
        let cursor = try await DatabaseQueue(path: db).read { db in try Int64.fetchOne(db, sql: "SELECT last_event_id FROM countdown_consumers WHERE name = 'exec'") }
        #expect((cursor ?? 0) > 0)
    }
}
}
