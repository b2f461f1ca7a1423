import Foundation
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

extension RealProcesses {
/// `countdown cooldown` and `countdown debounce` on the built binary: their exit statuses, what
/// they print, and the rule fields of `show` and `list`.
@Suite(
    "countdown tool: cooldown and debounce",
    .enabled(if: FileManager.default.isExecutableFile(atPath: countdownBinary.path)))
struct ToolRuleTests {
    let folder: TemporaryFolder
    var db: String { folder.path("rules.sqlite") }

    init() throws {
        folder = try TemporaryFolder()
    }

    /// Runs the tool to completion on the suite's database.
    @discardableResult
    func countdown(_ arguments: [String]) throws -> ToolTests.Result {
        let ran = try HelperProcess.run(countdownBinary, ["--db", db] + arguments)
        return ToolTests.Result(status: ran.status, stdout: ran.stdout, stderr: ran.stderr)
    }

    /// The item `show --json` prints for `key`.
    func shown(_ key: String) throws -> [String: Any] {
        let shown = try countdown(["show", key, "--json"])
        #expect(shown.status == 0, "show \(key): \(shown.stderr)")
        return try #require(shown.json, "\(shown.stdout)")
    }

    /// Milliseconds since 1970 of an instant as the tool prints it.
    func instant(_ value: Any?) -> Int64? {
        guard let text = value as? String else { return nil }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)?.millisecondsSince1970
    }

    @Test("cooldown exits 0 and starts it, then 75 with the time left and its end, in text and in JSON")
    func cooldownThenCoolingDown() throws {
        let allowed = try countdown(["cooldown", "nightly-export", "1h", "--group", "jobs"])
        #expect(allowed.status == 0, "\(allowed.stderr)")
        #expect(allowed.stdout.hasPrefix("nightly-export: cooldown of 1h started, ends at "), "\(allowed.stdout)")
        #expect(allowed.stdout.split(separator: "\n").count == 1 && allowed.stderr.isEmpty)
        let started = try shown("nightly-export")
        #expect(started["rule"] as? String == "cooldown" && started["group"] as? String == "jobs")
        #expect(started["max_wait_ms"] is NSNull && started["bound_at"] is NSNull)
        let deadline = try #require(started["deadline_at"] as? String)
        #expect(allowed.stdout.contains(deadline), "the line names the end: \(allowed.stdout)")

        let refused = try countdown(["cooldown", "nightly-export", "1h"])
        #expect(refused.status == 75, "\(refused.stderr)")
        #expect(refused.stderr.isEmpty, "the answer is on stdout: \(refused.stderr)")
        #expect(refused.stdout.hasPrefix("cooling down: 'nightly-export' has "), "\(refused.stdout)")
        #expect(refused.stdout.contains(" left (until \(deadline))"), "\(refused.stdout)")

        let json = try countdown(["cooldown", "nightly-export", "1h", "--json"])
        #expect(json.status == 75, "\(json.stderr)")
        let object = try #require(json.json, "\(json.stdout)")
        #expect(Set(object.keys) == ["allowed", "remaining_ms", "ends_at", "countdown"])
        #expect(object["allowed"] as? Bool == false)
        #expect((object["remaining_ms"] as? Int).map { $0 > 0 && $0 <= 3_600_000 } == true)
        #expect(object["ends_at"] as? String == deadline)
        let item = try #require(object["countdown"] as? [String: Any])
        #expect(Set(item.keys) == Set(ToolTests.fields), "the object of show --json")
        #expect(item["key"] as? String == "nightly-export" && item["rule"] as? String == "cooldown")
        #expect(item["generation"] as? Int == 1, "nothing changed")

        let fresh = try countdown(["cooldown", "resend-code", "60s", "--payload", "+15550100", "--json"])
        #expect(fresh.status == 0, "\(fresh.stderr)")
        let first = try #require(fresh.json, "\(fresh.stdout)")
        #expect(Set(first.keys) == ["allowed", "countdown"] && first["allowed"] as? Bool == true)
        let created = try #require(first["countdown"] as? [String: Any])
        #expect(Set(created.keys) == Set(ToolTests.fields))
        #expect(created["rule"] as? String == "cooldown" && created["duration_ms"] as? Int == 60_000)
        #expect(created["payload"] as? String == "+15550100" && created["state"] as? String == "running")

        let listed = try #require(try countdown(["list", "--json"]).jsonArray)
        #expect(Set(listed.compactMap { $0["rule"] as? String }) == ["cooldown"] && listed.count == 2)
        let text = try countdown(["show", "nightly-export"]).stdout
        #expect(text.contains("\nrule         cooldown\n"), "\(text)")
    }

    @Test("A shell guard `countdown cooldown k 1h && echo ran` runs its command once over two runs")
    func shellGuard() throws {
        let script = #""$0" --db "$1" cooldown k 1h >/dev/null && echo ran"#
        var output = ""
        var statuses: [Int32] = []
        for _ in 0..<2 {
            let ran = try HelperProcess.run(URL(fileURLWithPath: "/bin/sh"), ["-c", script, countdownBinary.path, db])
            output += ran.stdout
            statuses.append(ran.status)
        }
        #expect(output == "ran\n", "\(output)")
        #expect(statuses == [0, 75])
    }

    @Test("debounce: a later call moves the deadline, never past the bound shown with the maximum wait")
    func debounceMovesTheDeadline() async throws {
        let first = try countdown(["debounce", "cart-mail", "5m", "--max-wait", "30m", "--payload", "v1"])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.hasPrefix("cart-mail: running, "), "prints the item as start does: \(first.stdout)")
        let before = try shown("cart-mail")
        #expect(before["rule"] as? String == "debounce" && before["max_wait_ms"] as? Int == 1_800_000)
        #expect(before["duration_ms"] as? Int == 300_000 && before["generation"] as? Int == 1)
        let startedAt = try #require(instant(before["started_at"]))
        let bound = try #require(instant(before["bound_at"]), "a running debounce has a bound")
        #expect(bound == startedAt + 1_800_000, "its maximum wait after the burst's first call")
        let firstDeadline = try #require(instant(before["deadline_at"]))

        // Each call is a new process, so the store clock has moved on; retried (bounded) in case it has not.
        var after: [String: Any] = [:]
        try await eventually("a later call moved the deadline") {
            let again = try self.countdown(["debounce", "cart-mail", "5m", "--max-wait", "30m", "--payload", "v2"])
            #expect(again.status == 0, "\(again.stderr)")
            after = try self.shown("cart-mail")
            return (self.instant(after["deadline_at"]) ?? 0) > firstDeadline
        }
        let secondDeadline = try #require(instant(after["deadline_at"]))
        #expect(secondDeadline <= bound, "never past the bound")
        #expect(after["generation"] as? Int == 1, "the same burst")
        #expect(after["payload"] as? String == "v2", "the last call's payload")
        #expect(instant(after["bound_at"]) == bound && after["max_wait_ms"] as? Int == 1_800_000)
        #expect(instant(after["started_at"]) == startedAt)

        let text = try countdown(["show", "cart-mail"]).stdout
        let boundText = try #require(after["bound_at"] as? String)
        #expect(text.contains("\nrule         debounce (max wait 30m00s, bound \(boundText))\n"), "\(text)")
        let listed = try #require(try countdown(["list", "--json"]).jsonArray?.first)
        #expect(listed["rule"] as? String == "debounce" && listed["bound_at"] as? String == boundText)
        #expect(listed["max_wait_ms"] as? Int == 1_800_000)

        let plain = try countdown(["start", "plain", "5m"])
        #expect(plain.status == 0)
        let plainText = try countdown(["show", "plain"]).stdout
        #expect(!plainText.contains("rule"), "no rule line for a plain countdown: \(plainText)")
        let plainJSON = try shown("plain")
        #expect(plainJSON["rule"] is NSNull && plainJSON["max_wait_ms"] is NSNull && plainJSON["bound_at"] is NSNull)
    }

    @Test("debounce refuses a maximum wait shorter than the quiet period, naming both, and writes nothing")
    func debounceRefusesAShortMaximumWait() throws {
        let refused = try countdown(["debounce", "cart-mail", "10m", "--max-wait", "5m"])
        #expect(refused.status == 64, "\(refused.stderr)")
        #expect(refused.stderr.hasPrefix("countdown: ") && refused.stderr.split(separator: "\n").count == 1)
        #expect(refused.stderr.contains("5m00s") && refused.stderr.contains("10m00s"), "\(refused.stderr)")
        let shown = try countdown(["show", "cart-mail"])
        #expect(shown.status == 66 && shown.stderr.contains("'cart-mail'"), "nothing written: \(shown.stderr)")

        let missing = try countdown(["debounce", "cart-mail", "10m"])
        #expect(missing.status == 64 && missing.stderr.contains("--max-wait"), "\(missing.stderr)")
        let bad = try countdown(["debounce", "cart-mail", "10m", "--max-wait", "soon"])
        #expect(bad.status == 64 && bad.stderr.contains("'soon'"), "\(bad.stderr)")
        #expect(try countdown(["show", "cart-mail"]).status == 66)
    }

    @Test("cooldown or debounce on a key holding another kind of item is refused with 65, naming it; nothing changes")
    func wrongKindOfItem() throws {
        #expect(try countdown(["start", "order-1042", "15m"]).status == 0)
        let before = try shown("order-1042")
        let refused = try countdown(["cooldown", "order-1042", "1h"])
        #expect(refused.status == 65, "\(refused.stderr)")
        #expect(refused.stderr.hasPrefix("countdown: ") && refused.stderr.split(separator: "\n").count == 1)
        let named = refused.stderr.contains("'order-1042'") && refused.stderr.contains("a plain countdown")
        #expect(named, "\(refused.stderr)")
        #expect(refused.stdout.isEmpty)
        let after = try shown("order-1042")
        #expect(after["rule"] is NSNull && after["duration_ms"] as? Int == 900_000)
        #expect(after["generation"] as? Int == before["generation"] as? Int)

        #expect(try countdown(["cooldown", "resend", "1m"]).status == 0)
        let debounced = try countdown(["debounce", "resend", "1m", "--max-wait", "5m"])
        #expect(debounced.status == 65 && debounced.stderr.contains("a cooldown"), "\(debounced.stderr)")
        #expect(try shown("resend")["rule"] as? String == "cooldown")
    }

    @Test("A plain JSONEncoder gives the rule fields as the tool prints them, and they decode back")
    func codableRuleFields() async throws {
        #expect(try countdown(["debounce", "held", "1m", "--max-wait", "10m", "--group", "g"]).status == 0)
        #expect(try countdown(["pause", "held"]).status == 0)
        #expect(try countdown(["cooldown", "cooling", "1h"]).status == 0)
        #expect(try countdown(["pause", "cooling"]).status == 0)
        #expect(try countdown(["debounce", "running", "1m", "--max-wait", "10m"]).status == 0)
        let store = try CountdownStore(path: db)
        for key in ["held", "cooling"] {  // paused: figures that do not move while the test reads them
            let tool = try shown(key)
            let item = try #require(try await store.countdown(key))
            let encoded = try JSONEncoder().encode(item)
            let library = try #require(try JSONSerialization.jsonObject(with: encoded) as? [String: Any])
            #expect(NSDictionary(dictionary: library) == NSDictionary(dictionary: tool), "\(key): \(library), \(tool)")
            let decoded = try JSONDecoder().decode(Countdown.self, from: encoded)
            #expect(decoded.rule == item.rule && decoded.maxWait == item.maxWait && decoded.boundAt == item.boundAt)
        }
        let tool = try shown("running")
        let item = try #require(try await store.countdown("running"))
        let encoded = try JSONEncoder().encode(item)
        let library = try #require(try JSONSerialization.jsonObject(with: encoded) as? [String: Any])
        for field in ["rule", "max_wait_ms", "bound_at"] {
            #expect("\(library[field] ?? "-")" == "\(tool[field] ?? "-")", "\(field): \(library) vs \(tool)")
        }
        #expect(library["bound_at"] is String)
        try await store.close()
    }

    @Test("Processes racing for one cooldown: exactly one exits 0, the others 75")
    func processesRaceForOneCooldown() async throws {
        try countdown(["start", "warm-up", "1h"])  // the store exists before the race
        let database = db
        let statuses = try await withThrowingTaskGroup(of: Int32.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    try HelperProcess.run(countdownBinary, ["--db", database, "cooldown", "resend:+15550100", "1m"]).status
                }
            }
            return try await group.reduce(into: [Int32]()) { $0.append($1) }
        }
        #expect(statuses.sorted() == [0] + Array(repeating: 75, count: 7), "\(statuses)")
        let store = try CountdownStore(path: db)
        #expect(try await events(store, key: "resend:+15550100").map(\.kind) == ["started"], "one start, one write")
        try await store.close()
    }
}
}
