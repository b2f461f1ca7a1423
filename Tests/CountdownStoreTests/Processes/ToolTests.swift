import Foundation
import GRDB
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

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
                         "started_at", "deadline_at", "expired_at", "generation", "payload", "rule", "max_wait_ms",
                         "bound_at"]

    @Test("On PostgreSQL: every subcommand through a postgres:// URL, doctor's server lines, and bad URLs named")
    func postgresURL() throws {
        let server = try TestPostgres.shared()
        let url = server.url + "?sslmode=disable&schema=" + PostgresFixtures.newSchema()
        let started = try countdown(["--db", url, "start", "order-1", "15m", "--group", "payments", "--json"], database: false)
        #expect(started.status == 0, "\(started.stderr)")
        let shown = try countdown(["--db", url, "show", "order-1", "--json"], database: false)
        #expect(shown.stdout.contains("\"key\":\"order-1\"") && shown.stdout.contains("\"state\":\"running\""))
        let viaEnvironment = try countdown(["list"], database: false, environment: ["COUNTDOWN_DB": url])
        #expect(viaEnvironment.stdout.contains("order-1"), "\(viaEnvironment.stderr)")
        #expect(try countdown(["--db", url, "cancel", "order-1"], database: false).status == 0)
        let doctor = try countdown(["--db", url, "doctor"], database: false)
        #expect(doctor.status == 0, "\(doctor.stderr)")
        for line in ["server         PostgreSQL", "lease term", "host clock"] {
            #expect(doctor.stdout.contains(line), "doctor lacks \(line): \(doctor.stdout)")
        }
        let bad = try countdown(["--db", "postgres://user:secret@host/db?colour=red", "list"], database: false)
        #expect(bad.status != 0 && bad.stderr.contains("'colour'") && !bad.stderr.contains("secret"), "\(bad.stderr)")
    }

    @Test("--json escapes quotes, backslashes and control characters, and keeps every other character as it is")
    func jsonEscapes() throws {
        let key = "say \"hi\" \\ ordre-été-🍵 注文"
        let payload = "{\"note\":\"line\\nbreak\\u0001 \\\"quoted\\\"\"}"
        let started = try countdown(["start", key, "15m", "--payload", payload, "--json"])
        #expect(started.status == 0, "\(started.stderr)")
        let object = try #require(started.json, "\(started.stdout)")
        #expect(object["key"] as? String == key)
        let shownPayload = try #require(object["payload"] as? String)
        let decoded = try #require(try JSONSerialization.jsonObject(with: Data(shownPayload.utf8)) as? [String: String])
        #expect(decoded["note"] == "line\nbreak\u{01} \"quoted\"")
        #expect(!started.stdout.contains("\u{01}") && !started.stdout.dropLast().contains("\n"), "control characters are escaped")
        // The instants are ISO-8601 UTC with milliseconds, as the views write them.
        let instant = try #require(object["started_at"] as? String)
        #expect(instant.count == 24 && instant.hasSuffix("Z") && parseInstant(instant) != nil, "\(instant)")
    }

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
        #expect(doctor["integrity_check"] as? String == "full" && (doctor["integrity_ms"] as? Int ?? -1) >= 0)
        let doctorText = try countdown(["doctor"]).stdout
        #expect(doctorText.contains("calibration") && doctorText.contains("ok (full check, "), "\(doctorText)")
        let quick = try #require(try countdown(["doctor", "--integrity", "quick", "--json"]).json)
        #expect(quick["integrity_check"] as? String == "quick" && (quick["integrity"] as? [String]) == ["ok"])
        let skipped = try countdown(["doctor", "--integrity", "skip"])
        #expect(skipped.status == 0 && skipped.stdout.contains("not checked (--integrity skip)"), "\(skipped.stdout)")
        let unknown = try countdown(["doctor", "--integrity", "thorough"])
        #expect(unknown.status == 64 && unknown.stderr.contains("thorough"), "\(unknown.stderr)")
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

    @Test("--db, then $COUNTDOWN_DB, then $XDG_DATA_HOME/countdown/countdowns.sqlite, then $HOME/.local/share/…; new files are 0600")
    func databasePathRule() throws {
        let viaEnvironment = folder.path("env.sqlite")
        #expect(try countdown(["start", "e", "1m"], database: false, environment: ["COUNTDOWN_DB": viaEnvironment]).status == 0)
        #expect(FileManager.default.fileExists(atPath: viaEnvironment))
        #expect(try countdown(["start", "x", "1m"], database: false).status == 0)
        let xdg = folder.path("xdg/countdown/countdowns.sqlite")
        #expect(FileManager.default.fileExists(atPath: xdg))
        #expect(try countdown(["start", "d", "1m"]).status == 0)
        // Without XDG_DATA_HOME, `~` is $HOME, not the password database's home.
        let home = folder.path("home")
        #expect(try countdown(["start", "h", "1m"], database: false, environment: ["XDG_DATA_HOME": "", "HOME": home]).status == 0)
        let underHome = home + "/.local/share/countdown/countdowns.sqlite"
        #expect(FileManager.default.fileExists(atPath: underHome))
        for path in [viaEnvironment, xdg, db, underHome] {
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
    func stop(_ run: HelperProcess) async -> (status: Int32, lines: [[String: Any]]) {
        run.kill(SIGTERM)
        let lines = await run.finish().compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
        return (run.process.terminationStatus, lines)
    }

    /// Milliseconds since 1970 of an ISO-8601 instant with milliseconds, as the tool prints them.
    func parseInstant(_ text: String) -> Int64? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)?.millisecondsSince1970
    }

    /// Runs `sqlite3` on the tool's database, as a person at the prompt would, with no process of ours running.
    func sqlite3(_ sql: String) throws -> String {
        let ran = try HelperProcess.run(URL(fileURLWithPath: "/usr/bin/sqlite3"), ["-readonly", db, sql])
        #expect(ran.status == 0, "\(ran.stderr)")
        return ran.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test(
        "A countdown past its deadline shows as expired in show, list and the views, at a fixed instant, with no run going; a refused pause records it; run delivers it once",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3")))
    func expiredWithoutRun() async throws {
        let started = try #require(try countdown(["start", "soon", "300ms", "--json"]).json)
        let startedAt = try #require(started["started_at"] as? String)
        let zero = StoreTime.iso8601(milliseconds: try #require(parseInstant(startedAt)) + 300)
        // Real time must pass the deadline: wait for it, within a bound, without asserting how long it took.
        try await eventually("soon reached zero") { try self.countdown(["show", "soon", "--json"]).json?["state"] as? String == "expired" }

        let shown = try #require(try countdown(["show", "soon", "--json"]).json)
        #expect(shown["remaining_ms"] as? Int == 0 && shown["elapsed_ms"] as? Int == 300)
        #expect(shown["expired_at"] as? String == zero && shown["deadline_at"] as? String == zero)
        let text = try countdown(["show", "soon"]).stdout
        #expect(text.contains("state        expired") && text.contains("expired at   \(zero)") && text.contains("deadline at  \(zero)"))
        #expect(try countdown(["list"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "no countdowns")
        let expired = try #require(try countdown(["list", "--state", "expired", "--json"]).jsonArray)
        #expect(expired.map { $0["key"] as? String } == ["soon"] && expired.first?["expired_at"] as? String == zero)
        #expect(try countdown(["list", "--state", "expired"]).stdout.contains("soon"))
        #expect(try sqlite3("SELECT count(*) FROM active_countdowns") == "0")
        #expect(try sqlite3("SELECT key, state, remaining_ms, expired_at, deadline_at FROM expired_countdowns") == "soon|expired|0|\(zero)|\(zero)")
        #expect(try sqlite3("SELECT count(*) FROM countdown_events WHERE kind = 'expired'") == "0", "nothing has recorded it yet")
        let doctor = try #require(try countdown(["doctor", "--json"]).json)
        #expect(doctor["counts"].map { "\($0)" }?.contains("expired") == true, "\(doctor["counts"] ?? "")")

        let paused = try countdown(["pause", "soon"])
        #expect(paused.status == 65 && paused.stderr.contains("has expired"))
        #expect(try sqlite3("SELECT key, deadline_at_ms, late_ms >= 0 FROM countdown_events WHERE kind = 'expired'")
            == "soon|\(try #require(parseInstant(zero)))|1", "the refused pause kept the expiry it found")
        #expect(try countdown(["show", "soon", "--json"]).json?["expired_at"] as? String == zero, "recorded at the same instant")
        #expect(try countdown(["list", "--state", "expired", "--json"]).jsonArray?.count == 1)

        let run = try startRun(["--consumer", "mailer"])
        try await eventually("run delivered the expiry") {
            try self.sqlite3("SELECT last_event_id >= (SELECT max(id) FROM countdown_events WHERE kind = 'expired') FROM countdown_consumers WHERE name = 'mailer'") == "1"
        }
        try countdown(["start", "next", "1h"])  // one more write while run goes on: nothing is delivered twice
        let (status, lines) = await stop(run)
        #expect(status == 0)
        #expect(lines.map { $0["key"] as? String } == ["soon"])
        #expect(lines.first?["deadline_at"] as? String == zero)
    }

    @Test("A plain JSONEncoder gives exactly the tool's objects: show --json and run's lines; they decode back")
    func codableMatchesTheTool() async throws {
        try countdown(["start", "paid", "10m", "--group", "orders", "--payload", "{\"order\":7}"])
        try countdown(["pause", "paid"])
        try countdown(["stopwatch", "watch"])
        try countdown(["pause", "watch"])
        try countdown(["start", "gone", "1h"])
        try countdown(["cancel", "gone"])
        try countdown(["start", "due", "1ms", "--payload", "p"])
        try await eventually("due reached zero") { try self.countdown(["show", "due", "--json"]).json?["state"] as? String == "expired" }
        let store = try CountdownStore(path: db)
        for key in ["paid", "watch", "gone", "due"] {  // figures that do not move while the test reads them
            let tool = try #require(try countdown(["show", key, "--json"]).json)
            let item = try #require(try await store.countdown(key))
            let encoded = try JSONEncoder().encode(item)
            let library = try #require(try JSONSerialization.jsonObject(with: encoded) as? [String: Any])
            #expect(NSDictionary(dictionary: library) == NSDictionary(dictionary: tool), "\(key): \(library) vs \(tool)")
            let decoded = try JSONDecoder().decode(Countdown.self, from: encoded)
            #expect(decoded.key == item.key && decoded.state == item.state && decoded.remainingMs == item.remainingMs)
            #expect(decoded.elapsedMs == item.elapsedMs && decoded.startedAt == item.startedAt && decoded.expiredAt == item.expiredAt)
            #expect(decoded.deadlineAt == item.deadlineAt && decoded.group == item.group && decoded.generation == item.generation)
        }
        #expect(try await store.countdown("paid")?.durationMs == 600_000)

        let run = try startRun(["--consumer", "codable"])
        try await eventually("run delivered the expiry") {
            try self.sqlite3("SELECT count(*) FROM countdown_consumers WHERE name = 'codable' AND last_event_id > 0") == "1"
        }
        let (_, lines) = await stop(run)
        let line = try #require(lines.first)
        let event = try #require(try await store.recentEvents(kinds: [.expired]).first)
        let library = try #require(try JSONSerialization.jsonObject(with: try JSONEncoder().encode(event)) as? [String: Any])
        #expect(NSDictionary(dictionary: library) == NSDictionary(dictionary: line), "\(library) vs \(line)")
        let decoded = try JSONDecoder().decode(CountdownEvent.self, from: try JSONEncoder().encode(event))
        #expect(decoded.kind == .expired && decoded.key == "due" && decoded.lateMs == event.lateMs && decoded.firedAt == event.firedAt)
        try await store.close()
    }

    @Test("list --limit takes any positive count and --all lists everything; --json is one array")
    func listLimits() throws {
        try countdown(["start", "a", "1h"])
        try countdown(["start", "b", "2h"])
        try countdown(["start", "c", "3h"])
        #expect(try countdown(["list", "--limit", "2", "--json"]).jsonArray?.map { $0["key"] as? String } == ["a", "b"])
        #expect(try countdown(["list", "--limit", "20000", "--json"]).jsonArray?.count == 3)
        #expect(try countdown(["list", "--all", "--json"]).jsonArray?.count == 3)
        #expect(try countdown(["list", "--all", "--state", "expired", "--json"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "[]")
        let zero = try countdown(["list", "--limit", "0"])
        #expect(zero.status == 64 && zero.stderr.contains("invalid limit 0"))
        let both = try countdown(["list", "--limit", "5", "--all"])
        #expect(both.status == 64 && both.stderr.contains("--all"))
    }

    @Test(
        "list --all --json dumps a large store as one JSON array in memory that does not grow with the count",
        .enabled(if: ProcessInfo.processInfo.environment["PATH"].map { $0.split(separator: ":").contains { FileManager.default.isExecutableFile(atPath: "\($0)/python3") } } ?? false))
    func dumpInConstantMemory() async throws {
        let large = suiteSize("COUNTDOWN_DUMP_ITEMS", ci: 100_000)
        func fill(_ path: String, _ count: Int) async throws {
            let store = try CountdownStore(path: path)
            for start in stride(from: 0, to: count, by: 10_000) {
                try await store.start((start..<min(count, start + 10_000)).map {
                    .countdown("item-\($0)", duration: .seconds(3600 + Int64($0 % 977)), group: "g\($0 % 7)")
                })
            }
            try await store.close()
        }
        /// The dump's item count and the tool's peak resident memory in KiB, measured by the kernel for that child alone.
        func dump(_ path: String) throws -> (count: Int, peakKiB: Int) {
            let out = folder.path("dump-\(UUID().uuidString).json")
            let script = """
                import resource, subprocess, sys
                with open(sys.argv[1], "w") as out:
                    status = subprocess.run(sys.argv[2:], stdout=out).returncode
                print(status, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
                """
            let ran = try HelperProcess.run(
                URL(fileURLWithPath: "/usr/bin/env"),
                ["python3", "-c", script, out, Self.binary.path, "--db", path, "list", "--all", "--state", "all", "--json"],
                environment: ["SWIFT_BACKTRACE": "enable=no"])
            let fields = ran.stdout.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            #expect(ran.status == 0 && fields.first == 0, "\(ran.stdout) \(ran.stderr)")
            let array = try JSONSerialization.jsonObject(with: try Data(contentsOf: URL(fileURLWithPath: out))) as? [[String: Any]]
            return (array?.count ?? -1, fields.last ?? 0)
        }
        let smallPath = folder.path("small.sqlite")
        let largePath = folder.path("large.sqlite")
        try await fill(smallPath, 1000)
        try await fill(largePath, large)
        let small = try dump(smallPath)
        let big = try dump(largePath)
        #expect(small.count == 1000 && big.count == large)
        // Holding the items or their JSON would take tens of MiB more; a page at a time takes the same.
        #expect(big.peakKiB - small.peakKiB < 16 * 1024, "peak \(small.peakKiB) KiB for 1000 items, \(big.peakKiB) KiB for \(large)")
        print("list --all --json: peak resident \(small.peakKiB) KiB for 1000 items, \(big.peakKiB) KiB for \(large)")
    }

    @Test("run --consumer prints one JSON line per expiry and resumes across a restart without loss or repeats")
    func runResumesAcrossRestarts() async throws {
        for index in 0..<5 { try countdown(["start", "early-\(index)", "\(100 + index * 10)ms", "--payload", "p\(index)"]) }
        let first = try startRun(["--consumer", "tests"])
        try await eventually("the first batch expired") {
            try self.expiredCount() == 5
        }
        try await Task.sleep(for: .milliseconds(300))  // let the lines be written and acknowledged
        let (firstStatus, firstLines) = await stop(first)
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
        let secondKeys = await stop(second).lines.compactMap { $0["key"] as? String }
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
        _ = await stop(run)
        let logged = try String(contentsOfFile: marker, encoding: .utf8)
        #expect(logged.hasPrefix("job g hello "))
        let cursor = try await DatabaseQueue(path: db).read { db in try Int64.fetchOne(db, sql: "SELECT last_event_id FROM countdown_consumers WHERE name = 'exec'") }
        #expect((cursor ?? 0) > 0)
    }
}
}
