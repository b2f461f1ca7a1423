import Foundation
import GRDB
import Testing

import CountdownStoreCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A `countdown serve --port 0` process, with the address it printed on its first line.
///
/// Its stdout goes to a file (`exec >FILE`), read while it runs: ``HelperProcess`` reads its
/// output only at the end. Every wait is bounded; a server that dies or does not stop fails the
/// test with its stderr.
final class ServeProcess: Sendable {
    let helper: HelperProcess
    let port: Int
    /// What it printed first: `countdown serve: http://127.0.0.1:PORT/ (…)`.
    let firstLine: String

    /// The page's address.
    var base: String { "http://127.0.0.1:\(port)/" }

    private init(helper: HelperProcess, port: Int, firstLine: String) {
        self.helper = helper
        self.port = port
        self.firstLine = firstLine
    }

    /// Starts `countdown --db database serve --port 0 arguments…` and waits (at most 30 s) for
    /// its first line.
    static func start(
        database: String, folder: TemporaryFolder, arguments: [String] = [], environment: [String: String] = [:]
    ) async throws -> ServeProcess {
        let output = folder.path("serve-\(UUID().uuidString).out")
        let helper = try HelperProcess(
            ["--db", database, "serve", "--port", "0"] + arguments, executable: countdownBinary,
            shell: "exec >'\(output)'",
            environment: environment)
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n", omittingEmptySubsequences: false).first, text.contains("\n") {
                let pattern = #/countdown serve: http://127\.0\.0\.1:(\d+)/ \((.+)\)/#
                guard let match = try pattern.wholeMatch(in: String(line)), let port = Int(match.1) else {
                    helper.kill()
                    _ = await helper.finish(limit: 10, status: nil)
                    throw HTTPFailure(
                        "countdown serve printed an unexpected first line: \(line); stderr: \(helper.stderr.suffix(2000))"
                    )
                }
                return ServeProcess(helper: helper, port: port, firstLine: String(line))
            }
            if !helper.process.isRunning {
                _ = await helper.finish(limit: 10, status: nil)
                throw HTTPFailure(
                    "countdown serve ended before printing its address; stderr: \(helper.stderr.suffix(2000))")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        helper.kill()
        _ = await helper.finish(limit: 10, status: nil)
        throw HTTPFailure("countdown serve printed no address within 30 s; stderr: \(helper.stderr.suffix(2000))")
    }

    func get(_ path: String, headers: [String: String] = [:]) async throws -> HTTPAnswer {
        try await httpRequest(port: port, "GET", path, headers: headers)
    }

    /// `POST path` with `body`, and `Authorization: Bearer token` when there is a token.
    func post(_ path: String, _ body: Data? = nil, token: String? = nil, headers: [String: String] = [:]) async throws
        -> HTTPAnswer
    {
        var headers = headers
        if let token { headers["Authorization"] = "Bearer \(token)" }
        // Every write is JSON, with a body or without one (a test may send another type).
        if headers["Content-Type"] == nil { headers["Content-Type"] = "application/json" }
        return try await httpRequest(port: port, "POST", path, headers: headers, body: body)
    }

    /// Asks the server to stop (SIGTERM) and waits at most `limit` seconds for it to exit with
    /// status 0; otherwise it is killed with its process group and the test fails with its
    /// stderr. Whatever it wrote on stderr is printed.
    func stop(limit: Double = 10) async {
        guard helper.process.isRunning else {
            _ = await helper.finish(limit: 10, status: 0)
            report()
            return
        }
        helper.kill(SIGTERM)
        if await !waitForExit(helper, limit: limit) {
            killGroup(helper.process.processIdentifier)
            _ = await helper.finish(limit: 10, status: nil)
            Issue.record(
                "countdown serve did not stop within \(Int(limit)) s of SIGTERM; killed. stderr: \(helper.stderr.suffix(2000))"
            )
            return
        }
        _ = await helper.finish(limit: 10, status: 0)
        report()
    }

    private func report() {
        let errors = helper.stderr
        if !errors.isEmpty { print("countdown serve (port \(port)) wrote on stderr:\n\(errors.suffix(4000))") }
    }
}

/// Runs `body` with `countdown serve` on `database`, then stops it (also when `body` throws,
/// then with its stderr).
func withServeProcess(
    database: String, folder: TemporaryFolder, arguments: [String], environment: [String: String] = [:],
    _ body: (ServeProcess) async throws -> Void
) async throws {
    let server = try await ServeProcess.start(database: database, folder: folder, arguments: arguments, environment: environment)
    do {
        try await body(server)
    } catch {
        await server.stop()
        Issue.record("failed with \(error); countdown serve's stderr: \(server.helper.stderr.suffix(2000))")
        throw error
    }
    await server.stop()
}

/// JSON for a request body.
func jsonBody(_ fields: [String: String]) -> Data {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    return (try? encoder.encode(fields)) ?? Data()
}

/// `key` percent-encoded for one segment of a path: everything but letters, digits and `-._~`.
func pathSegment(_ key: String) -> String {
    key.addingPercentEncoding(
        withAllowedCharacters: CharacterSet(
            charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"))
        ?? key
}

/// `text` as a query value.
func queryValue(_ text: String) -> String { pathSegment(text) }

/// What a run of the tool gave.
struct ToolRun: Sendable {
    var status: Int32
    var stdout: String
    var stderr: String

    var object: [String: Any]? { (try? JSONSerialization.jsonObject(with: Data(stdout.utf8))) as? [String: Any] }
    var array: [[String: Any]]? { (try? JSONSerialization.jsonObject(with: Data(stdout.utf8))) as? [[String: Any]] }
}

/// Runs `countdown --db database arguments…` to its end (at most 60 s).
func runCountdown(_ database: String, _ arguments: [String]) async throws -> ToolRun {
    let helper = try HelperProcess(["--db", database] + arguments, executable: countdownBinary)
    _ = await helper.finish(limit: 60, status: nil)
    return ToolRun(status: helper.process.terminationStatus, stdout: helper.stdout, stderr: helper.stderr)
}

/// The fields of an API item: `countdown show --json`'s, and the rules' (`rule`, `max_wait_ms`, `bound_at`).
let apiItemFields = Set(RealProcesses.ToolTests.fields + ["rule", "max_wait_ms", "bound_at"])

/// An API item with only the fields `tool` (an object of `countdown show --json`) has.
func fields(_ item: [String: Any], of tool: [String: Any]) -> [String: Any] {
    item.filter { tool[$0.key] != nil }
}

/// An item's JSON without the figures that move with time, as one line with sorted keys.
func stableItem(_ item: [String: Any]) -> String {
    var item = item
    item.removeValue(forKey: "elapsed_ms")
    item.removeValue(forKey: "remaining_ms")
    let data = (try? JSONSerialization.data(withJSONObject: item, options: [.sortedKeys])) ?? Data()
    return String(decoding: data, as: UTF8.self)
}

extension RealProcesses {
    /// The HTTP API of `countdown serve`, over real HTTP on 127.0.0.1, against the built binary,
    /// with the tool writing the same file from other processes.
    @Suite(
        "countdown serve: the HTTP API",
        .enabled(if: FileManager.default.isExecutableFile(atPath: countdownBinary.path)),
        .timeLimit(.minutes(5)))
    struct ServerAPITests {
        static let token = "s3cret-token-for-the-tests"

        let folder: TemporaryFolder
        var db: String { folder.path("serve.sqlite") }

        init() throws {
            folder = try TemporaryFolder()
        }

        /// Runs `body` with a server on `db`, then stops it (also when `body` throws, then with its stderr).
        func withServer(
            _ arguments: [String] = ["--token", ServerAPITests.token], environment: [String: String] = [:],
            _ body: (ServeProcess) async throws -> Void
        ) async throws {
            try await withServeProcess(database: db, folder: folder, arguments: arguments, environment: environment, body)
        }

        func countdown(_ arguments: [String]) async throws -> ToolRun {
            try await runCountdown(db, arguments)
        }

        /// What the store holds, seen by the tool (`list --state all --json` without the moving
        /// figures) and in the file (every row of `countdowns` and `countdown_events`).
        func storeContents() async throws -> [String] {
            let listed = try await countdown(["list", "--state", "all", "--limit", "1000", "--json"])
            let items = try #require(listed.array, "list --json: \(listed.stderr)")
            var configuration = GRDB.Configuration()
            configuration.readonly = true
            let queue = try DatabaseQueue(path: db, configuration: configuration)
            defer { try? queue.close() }
            let rows = try await queue.read { db in
                try ["countdowns", "countdown_events"].flatMap { table in
                    try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY rowid").map { "\(table) \($0)" }
                }
            }
            return items.map(stableItem).sorted() + rows
        }

        @Test(
            "The list answers what the tool started in other processes, with show --json's fields; limit=2 pages walk every item once"
        )
        func listAndPaging() async throws {
            try await withServer { server in
                let started: [(String, [String])] = [
                    ("order-1042", ["15m", "--group", "payments", "--payload", "{\"order\":1042}"]),
                    ("order-1043", ["1h30m", "--group", "payments"]),
                    ("session-7f3a", ["20m", "--policy", "active"]),
                    ("trial-acme", ["2d", "--group", "trials"]),
                    ("build-2231", ["45m"]),
                ]
                for (key, arguments) in started {
                    let run = try await countdown(["start", key] + arguments)
                    #expect(run.status == 0, "\(run.stderr)")
                }

                let answer = try await server.get("/api/countdowns")
                #expect(answer.status == 200, "\(answer.summary)")
                #expect(answer.header("Content-Type")?.hasPrefix("application/json") == true)
                #expect(answer.header("X-Countdown-Now-Ms").flatMap(Int64.init) != nil)
                let page = try #require(answer.object, "\(answer.summary)")
                #expect(page["next"] is NSNull)
                #expect(page["now_ms"] is NSNumber && page["now"] is String)
                let items = try #require(page["items"] as? [[String: Any]])
                let keys = items.compactMap { $0["key"] as? String }
                #expect(
                    keys == ["order-1042", "session-7f3a", "build-2231", "order-1043", "trial-acme"], "soonest first")

                for item in items {
                    let key = try #require(item["key"] as? String)
                    #expect(Set(item.keys) == apiItemFields, "\(key): \(item.keys.sorted())")
                    #expect(item["rule"] is NSNull && item["max_wait_ms"] is NSNull && item["bound_at"] is NSNull)
                    let shown = try await countdown(["show", key, "--json"])
                    let expected = try #require(shown.object, "show \(key): \(shown.stderr)")
                    #expect(
                        stableItem(fields(item, of: expected)) == stableItem(expected),
                        "\(key): the API and show --json agree")
                    let remaining = try #require(item["remaining_ms"] as? Int)
                    let duration = try #require(item["duration_ms"] as? Int)
                    #expect(remaining > 0 && remaining <= duration)

                    // The same item alone.
                    let one = try await server.get("/api/countdowns/\(pathSegment(key))")
                    #expect(one.status == 200, "\(one.summary)")
                    #expect(one.object.map { stableItem(fields($0, of: expected)) } == stableItem(expected))
                    #expect(one.header("X-Countdown-Now-Ms") != nil)
                }

                // Keyset paging, two at a time: every item once, in the same order.
                var paged: [String] = []
                var pages = 0
                var cursor: String?
                repeat {
                    let path = "/api/countdowns?limit=2" + (cursor.map { "&after=\(queryValue($0))" } ?? "")
                    let answer = try await server.get(path)
                    #expect(answer.status == 200, "\(answer.summary)")
                    let page = try #require(answer.object)
                    let items = try #require(page["items"] as? [[String: Any]])
                    #expect(items.count <= 2 && !items.isEmpty)
                    paged += items.compactMap { $0["key"] as? String }
                    cursor = page["next"] as? String
                    pages += 1
                } while cursor != nil && pages < 10
                #expect(paged == keys)
                #expect(pages == 3)

                // Filters.
                let grouped = try await server.get("/api/countdowns?group=payments")
                #expect(itemKeys(grouped) == ["order-1042", "order-1043"])
                let paused = try await server.get("/api/countdowns?state=paused")
                #expect((paused.object?["items"] as? [[String: Any]])?.isEmpty == true)

                // An unknown key.
                let unknown = try await server.get("/api/countdowns/ghost")
                #expect(unknown.status == 404)
                #expect(unknown.error?.code == "notFound")
                #expect(unknown.error?.message.contains("'ghost'") == true, "\(unknown.summary)")
                #expect(unknown.header("X-Countdown-Now-Ms") != nil)
                let unknownEvents = try await server.get("/api/countdowns/ghost/events")
                #expect(
                    unknownEvents.status == 200 && itemKeys(unknownEvents) == [], "no events: \(unknownEvents.summary)")
            }
        }

        @Test(
            "With the token: start, pause, resume, extend, shorten, restart, cancel and remove through the API, seen by the tool"
        )
        func writesWithToken() async throws {
            try await withServer { server in
                let token = Self.token
                let started = try await server.post(
                    "/api/countdowns",
                    jsonBody(["key": "order-7", "duration": "15m", "group": "payments", "payload": "{\"n\":7}"]),
                    token: token)
                #expect(started.status == 200, "\(started.summary)")
                let item = try #require(started.object)
                #expect(Set(item.keys) == apiItemFields)
                #expect(item["state"] as? String == "running" && item["duration_ms"] as? Int == 900_000)
                #expect(item["group"] as? String == "payments" && item["payload"] as? String == "{\"n\":7}")
                #expect(started.header("X-Countdown-Now-Ms") != nil)
                let shown = try await countdown(["show", "order-7", "--json"])
                #expect(shown.object?["state"] as? String == "running", "another process sees it: \(shown.stderr)")

                func act(_ action: String, _ body: Data? = nil) async throws -> [String: Any] {
                    let answer = try await server.post("/api/countdowns/order-7/\(action)", body, token: token)
                    #expect(answer.status == 200, "\(action): \(answer.summary)")
                    return answer.object ?? [:]
                }
                #expect(try await act("pause")["state"] as? String == "paused")
                #expect(try await countdown(["show", "order-7", "--json"]).object?["state"] as? String == "paused")
                #expect(try await act("resume")["state"] as? String == "running")
                #expect(try await act("extend", jsonBody(["duration": "1m"]))["duration_ms"] as? Int == 960_000)
                #expect(try await act("shorten", jsonBody(["duration": "30s"]))["duration_ms"] as? Int == 930_000)
                let restarted = try await act("restart")
                #expect(restarted["state"] as? String == "running")
                #expect(restarted["generation"] as? Int ?? 0 > item["generation"] as? Int ?? 0)
                #expect(try await act("cancel")["state"] as? String == "cancelled")
                #expect(try await countdown(["show", "order-7", "--json"]).object?["state"] as? String == "cancelled")

                let events = try await server.get("/api/countdowns/order-7/events")
                #expect(events.status == 200, "\(events.summary)")
                let kinds = (events.object?["items"] as? [[String: Any]])?.compactMap { $0["event"] as? String } ?? []
                for kind in ["started", "paused", "resumed", "extended", "shortened", "restarted", "cancelled"] {
                    #expect(kinds.contains(kind), "\(kind) in \(kinds)")
                }

                let removed = try await act("remove")
                #expect(removed["key"] as? String == "order-7")
                #expect(try await server.get("/api/countdowns/order-7").status == 404)
                #expect(try await countdown(["show", "order-7"]).status == 66)

                // A stopwatch, and an unknown action.
                let watch = try await server.post(
                    "/api/countdowns", jsonBody(["key": "build", "kind": "stopwatch"]), token: token)
                #expect(watch.status == 200 && watch.object?["kind"] as? String == "stopwatch", "\(watch.summary)")
                let unknown = try await server.post("/api/countdowns/build/frobnicate", token: token)
                #expect(unknown.status == 404 && unknown.error?.code == "unknownAction", "\(unknown.summary)")
                #expect(unknown.error?.message.contains("'frobnicate'") == true)
            }
        }

        @Test("Without the token (or with a wrong one) every write answers 401 unauthorized and changes nothing")
        func writesWithoutToken() async throws {
            // The token from the environment this time.
            try await withServer([], environment: ["COUNTDOWN_TOKEN": Self.token]) { server in
                #expect(server.firstLine.hasSuffix("(writes need the token)"), "\(server.firstLine)")
                #expect(try await countdown(["start", "kept", "15m"]).status == 0)
                #expect(try await countdown(["start", "paused-one", "15m"]).status == 0)
                #expect(try await countdown(["pause", "paused-one"]).status == 0)
                let before = try await storeContents()

                let wrongs: [[String: String]] = [
                    [:],
                    ["Authorization": "Bearer wrong"],
                    ["Authorization": "Bearer \(Self.token)x"],
                    ["Authorization": "Bearer \(Self.token.prefix(8))"],
                    ["Authorization": "Bearer "],
                    ["Authorization": "Basic \(Self.token)"],
                    ["Authorization": Self.token],
                ]
                let writes: [(String, Data?)] = [
                    ("/api/countdowns", jsonBody(["key": "new-one", "duration": "5m"])),
                    ("/api/countdowns/kept/pause", nil),
                    ("/api/countdowns/paused-one/resume", nil),
                    ("/api/countdowns/kept/cancel", nil),
                    ("/api/countdowns/kept/restart", nil),
                    ("/api/countdowns/kept/remove", nil),
                    ("/api/countdowns/kept/extend", jsonBody(["duration": "1m"])),
                    ("/api/countdowns/kept/shorten", jsonBody(["duration": "1m"])),
                    ("/api/countdowns/ghost/pause", nil),
                ]
                for headers in wrongs {
                    for (path, body) in writes {
                        let answer = try await server.post(path, body, headers: headers)
                        #expect(answer.status == 401, "\(path) with \(headers): \(answer.summary)")
                        #expect(answer.error?.code == "unauthorized", "\(path): \(answer.summary)")
                        #expect(answer.error?.message.contains("Bearer") == true)
                        #expect(!answer.text.contains(Self.token), "the token is never echoed")
                    }
                }
                let after = try await storeContents()
                #expect(after == before, "nothing changed")

                // The right token still works.
                let allowed = try await server.post("/api/countdowns/kept/pause", token: Self.token)
                #expect(allowed.status == 200 && allowed.object?["state"] as? String == "paused", "\(allowed.summary)")
            }
        }

        @Test(
            "A server without a token is read-only: every write answers 401 readOnly, even with a token, and changes nothing"
        )
        func readOnlyServer() async throws {
            try await withServer([], environment: ["COUNTDOWN_TOKEN": ""]) { server in
                #expect(server.firstLine.hasSuffix("(read-only: no token)"), "\(server.firstLine)")
                #expect(try await countdown(["start", "kept", "15m"]).status == 0)
                let before = try await storeContents()
                for token in [nil, Self.token] {
                    for path in ["/api/countdowns", "/api/countdowns/kept/pause", "/api/countdowns/kept/remove"] {
                        let body = path == "/api/countdowns" ? jsonBody(["key": "x", "duration": "5m"]) : nil
                        let answer = try await server.post(path, body, token: token)
                        #expect(answer.status == 401, "\(path): \(answer.summary)")
                        #expect(answer.error?.code == "readOnly", "\(path): \(answer.summary)")
                    }
                }
                let after = try await storeContents()
                #expect(after == before, "nothing changed")
                let status = try await server.get("/api/status")
                #expect(status.status == 200 && status.object?["read_only"] as? Bool == true, "\(status.summary)")
                // Reads are open.
                let list = try await server.get("/api/countdowns")
                #expect((list.object?["items"] as? [[String: Any]])?.count == 1)
            }
        }

        @Test("Bad input answers 400 with a message naming the bad value, and changes nothing")
        func badInput() async throws {
            try await withServer { server in
                #expect(try await countdown(["start", "taken", "15m"]).status == 0)
                let before = try await storeContents()
                let starts: [(Data, String)] = [
                    (jsonBody(["key": "x", "duration": "abc"]), "'abc'"),
                    (jsonBody(["key": "x", "duration": "-5s"]), "'-5s'"),
                    (jsonBody(["key": "x", "duration": "0"]), "'0'"),
                    (jsonBody(["key": "x", "duration": "5m", "policy": "sometimes"]), "'sometimes'"),
                    (jsonBody(["key": "x", "duration": "5m", "kind": "timer"]), "'timer'"),
                    (jsonBody(["key": "x", "duration": "5m", "when_active": "maybe"]), "'maybe'"),
                    (jsonBody(["key": "", "duration": "5m"]), "''"),
                    (jsonBody(["key": "x"]), "missing duration"),
                    (jsonBody(["key": "x", "kind": "stopwatch", "duration": "5m"]), "\"duration\""),
                    (
                        jsonBody(["key": "x", "duration": "5m", "group": String(repeating: "g", count: 129)]),
                        "129 bytes"
                    ),
                    (jsonBody(["duration": "5m"]), "missing \"key\""),
                    (Data("{\"key\": 5, \"duration\": \"5m\"}".utf8), "\"key\""),
                    (Data("{\"key\":".utf8), "JSON"),
                    (Data("not json at all".utf8), "JSON"),
                    (Data(), "JSON"),
                ]
                for (body, named) in starts {
                    let answer = try await server.post("/api/countdowns", body, token: Self.token)
                    let sent = String(decoding: body, as: UTF8.self).prefix(80)
                    #expect(answer.status == 400, "\(sent): \(answer.summary)")
                    #expect(answer.error?.message.contains(named) == true, "\(sent) names \(named): \(answer.summary)")
                    #expect(answer.header("X-Countdown-Now-Ms") != nil)
                }
                let changes: [(String, Data?, String)] = [
                    ("/api/countdowns/taken/extend", jsonBody(["duration": "soon"]), "'soon'"),
                    ("/api/countdowns/taken/shorten", jsonBody(["duration": "-1m"]), "'-1m'"),
                    ("/api/countdowns/taken/extend", jsonBody([:]), "missing \"duration\""),
                    ("/api/countdowns/taken/extend", nil, "JSON"),
                ]
                for (path, body, named) in changes {
                    let answer = try await server.post(path, body, token: Self.token)
                    #expect(answer.status == 400, "\(path): \(answer.summary)")
                    #expect(answer.error?.message.contains(named) == true, "\(path) names \(named): \(answer.summary)")
                }
                let cursor = "bm90LWEtY3Vyc29y"
                let queries: [(String, String)] = [
                    ("limit=0", "'0'"), ("limit=abc", "'abc'"), ("limit=1001", "'1001'"), ("limit=-1", "'-1'"),
                    ("state=lost", "'lost'"), ("after=\(cursor)", "'\(cursor)'"), ("after=%25%25%25", "'%%%'"),
                ]
                for (query, named) in queries {
                    let answer = try await server.get("/api/countdowns?" + query)
                    #expect(answer.status == 400, "\(query): \(answer.summary)")
                    #expect(answer.error?.code == "invalidArgument", "\(query): \(answer.summary)")
                    #expect(answer.error?.message.contains(named) == true, "\(query) names \(named): \(answer.summary)")
                }
                let badKey = try await server.get("/api/countdowns/a%ZZ")
                #expect(badKey.status == 400 && badKey.error?.code == "invalidKey", "\(badKey.summary)")
                #expect(badKey.error?.message.contains("'a%ZZ'") == true, "\(badKey.summary)")
                let events = try await server.get("/api/countdowns/taken/events?limit=0")
                #expect(events.status == 400 && events.error?.message.contains("'0'") == true, "\(events.summary)")
                let after = try await storeContents()
                #expect(after == before, "nothing changed")
            }
        }

        @Test(
            "A change the item's state refuses answers 409: pausing an expired or a cancelled countdown, starting an active key"
        )
        func conflicts() async throws {
            try await withServer { server in
                let token = Self.token
                let short = try await server.post(
                    "/api/countdowns", jsonBody(["key": "brief", "duration": "200ms"]), token: token)
                #expect(short.status == 200, "\(short.summary)")
                // The server runs the ticker: it expires the countdown.
                try await eventually("brief expired", limit: 15) {
                    try await server.get("/api/countdowns/brief").object?["state"] as? String == "expired"
                }
                #expect(
                    try await server.post(
                        "/api/countdowns", jsonBody(["key": "dropped", "duration": "15m"]), token: token
                    ).status == 200)
                #expect(try await server.post("/api/countdowns/dropped/cancel", token: token).status == 200)
                #expect(
                    try await server.post(
                        "/api/countdowns", jsonBody(["key": "taken", "duration": "15m"]), token: token
                    ).status == 200)
                let before = try await storeContents()

                let refused: [(String, Data?, String)] = [
                    ("/api/countdowns/brief/pause", nil, "'brief'"),
                    ("/api/countdowns/dropped/pause", nil, "'dropped'"),
                    ("/api/countdowns/dropped/resume", nil, "'dropped'"),
                    ("/api/countdowns/brief/extend", jsonBody(["duration": "1m"]), "'brief'"),
                    ("/api/countdowns/taken/resume", nil, "'taken'"),
                    ("/api/countdowns", jsonBody(["key": "taken", "duration": "5m"]), "'taken'"),
                ]
                for (path, body, named) in refused {
                    let answer = try await server.post(path, body, token: token)
                    #expect(answer.status == 409, "\(path): \(answer.summary)")
                    #expect(answer.error?.message.contains(named) == true, "\(path) names \(named): \(answer.summary)")
                }
                let expired = try await server.post("/api/countdowns/brief/pause", token: token)
                #expect(expired.error?.message.contains("expired") == true, "\(expired.summary)")
                let cancelled = try await server.post("/api/countdowns/dropped/pause", token: token)
                #expect(cancelled.error?.message.contains("cancel") == true, "\(cancelled.summary)")
                let after = try await storeContents()
                #expect(after == before, "nothing changed")
            }
        }

        @Test(
            "Hostile keys round-trip exactly through POST, the percent-encoded path, the list, the stream and the tool")
        func hostileKeys() async throws {
            try await withServer { server in
                let keys = [
                    "<img src=x onerror=alert(1)></script>",
                    "team a/order 7",
                    "/lead and trail/",
                    "a//b",
                    "50% off?x=1&y=2#frag",
                    "%41%2F",
                    "a+b c",
                    "..",
                    "\"quoted\" \\ back",
                    "ordre-été 🍵 注文",
                ]
                let stream = try await HTTPStream.open(port: server.port, "/api/stream")
                let opened = try await stream.read(limit: 10) { $0.contains(": connected") }
                #expect(opened, "the stream opens: \(stream.text)")
                for key in keys {
                    let started = try await server.post(
                        "/api/countdowns", jsonBody(["key": key, "duration": "15m"]), token: Self.token)
                    #expect(started.status == 200, "\(key): \(started.summary)")
                    #expect(started.object?["key"] as? String == key)
                    let path = "/api/countdowns/\(pathSegment(key))"
                    let fetched = try await server.get(path)
                    #expect(fetched.status == 200, "GET \(path): \(fetched.summary)")
                    #expect(fetched.object?["key"] as? String == key, "GET \(path)")
                    let paused = try await server.post(path + "/pause", token: Self.token)
                    #expect(
                        paused.status == 200 && paused.object?["key"] as? String == key,
                        "pause \(path): \(paused.summary)")
                    let events = try await server.get(path + "/events")
                    #expect(itemKeys(events) == [key, key], "\(events.summary)")
                    let shown = try await countdown(["show", key, "--json"])
                    #expect(shown.object?["key"] as? String == key, "the tool reads it back: \(shown.stderr)")
                    #expect(shown.object?["state"] as? String == "paused")
                }
                let listed = try await server.get("/api/countdowns?limit=1000")
                let listedKeys = itemKeys(listed) ?? []
                #expect(Set(listedKeys) == Set(keys))
                let streamedAll = try await stream.read(limit: 10) { text in
                    let paused = Set(streamEvents(text).filter { $0.event == "paused" }.compactMap(\.key))
                    return keys.allSatisfy(paused.contains)
                }
                #expect(streamedAll, "every pause reached the stream: \(stream.text.suffix(3000))")
                let streamed = Set(streamEvents(stream.text).compactMap(\.key))
                #expect(streamed == Set(keys), "\(streamed)")
            }
        }

        @Test("A body over 256 KiB answers 413 and changes nothing")
        func bodyTooLarge() async throws {
            try await withServer { server in
                let before = try await storeContents()
                let body = jsonBody(["key": "big", "duration": "5m", "payload": String(repeating: "p", count: 300_000)])
                let answer = try await server.post("/api/countdowns", body, token: Self.token)
                #expect(answer.status == 413, "\(answer.summary)")
                #expect(answer.error?.code == "bodyTooLarge", "\(answer.summary)")
                let after = try await storeContents()
                #expect(after == before, "nothing changed")
                // The server still answers.
                #expect(try await server.get("/healthz").status == 200)
            }
        }

        @Test(
            "The event stream delivers a started event for a countdown the tool started in another process, within 5 s")
        func streamSeesOtherProcesses() async throws {
            try await withServer { server in
                let stream = try await HTTPStream.open(port: server.port, "/api/stream")
                let opened = try await stream.read(limit: 10) { $0.contains(": connected") }
                #expect(opened, "the stream opens: \(stream.text)")
                #expect(stream.status == 200)
                #expect(stream.headers["content-type"]?.hasPrefix("text/event-stream") == true, "\(stream.headers)")

                let run = try await countdown(["start", "from-the-tool", "10m", "--group", "cli"])
                #expect(run.status == 0, "\(run.stderr)")
                let seen = try await stream.read(limit: 5) { text in
                    streamEvents(text).contains { $0.key == "from-the-tool" && $0.event == "started" }
                }
                #expect(seen, "no started event within 5 s; received: \(stream.text.suffix(2000))")
                let found = streamEvents(stream.text).first(where: { $0.key == "from-the-tool" })
                let event = try #require(found, "received: \(stream.text.suffix(2000))")
                #expect(event.id != nil && event.id == event.json["id"] as? Int, "the id: line is the event's id")
                #expect(event.json["group"] as? String == "cli")
                #expect(!stream.text.contains("\nevent:") && !stream.text.hasPrefix("event:"), "no event: lines")
            }
        }

        static let prometheusClientInstalled: Bool = {
            guard
                let ran = try? HelperProcess.run(
                    URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", "import prometheus_client"])
            else { return false }
            return ran.status == 0
        }()

        @Test(
            "GET /metrics parses with prometheus_client: the API's starts counted, the gauges refreshed, the lease held",
            .enabled(
                if: ServerAPITests.prometheusClientInstalled,
                "python3 cannot import prometheus_client (pip install prometheus-client): the metrics check is skipped")
        )
        func metrics() async throws {
            try await withServer { server in
                let token = Self.token
                for (key, policy) in [("w1", "wall"), ("w2", "wall"), ("a1", "active")] {
                    let answer = try await server.post(
                        "/api/countdowns", jsonBody(["key": key, "duration": "15m", "policy": policy]), token: token)
                    #expect(answer.status == 200, "\(answer.summary)")
                }
                #expect(try await server.post("/api/countdowns/w2/pause", token: token).status == 200)
                // Another process's start: in the store (the gauges), not in this server's counters.
                #expect(try await countdown(["start", "from-the-tool", "15m"]).status == 0)

                var last: PrometheusText?
                try await eventually("countdown_items shows 3 running and 1 paused", limit: 30) {
                    last = try await scrape(server)
                    return last?.value("countdown_items", ["state": "running"]) == 3
                        && last?.value("countdown_items", ["state": "paused"]) == 1
                }
                let metrics = try #require(last)
                #expect(metrics.families["countdown_items"] == "gauge")
                #expect(
                    metrics.families["countdown_items_started"] == "counter",
                    "the parser names the family without _total: \(metrics.families)")
                #expect(metrics.value("countdown_items_started_total", ["policy": "wall"]) == 2)
                #expect(metrics.value("countdown_items_started_total", ["policy": "active"]) == 1)
                #expect(metrics.sum("countdown_items_started_total") == 3, "the tool's start is not this server's")
                #expect(metrics.value("countdown_items_paused_total", ["policy": "wall"]) == 1)
                #expect(metrics.families["countdown_lease_held"] == "gauge")
                #expect(metrics.value("countdown_lease_held", [:]) == 1)
                #expect(metrics.value("countdown_items", ["state": "expired"]) == 0)

                let health = try await server.get("/healthz")
                #expect(health.status == 200 && health.object?["status"] as? String == "ok", "\(health.summary)")
            }
        }

        /// `GET /metrics`, parsed by `prometheus_client.parser.text_string_to_metric_families`.
        func scrape(_ server: ServeProcess) async throws -> PrometheusText {
            let answer = try await server.get("/metrics")
            #expect(answer.status == 200, "\(answer.summary)")
            #expect(answer.header("Content-Type")?.hasPrefix("text/plain") == true)
            let file = folder.path("metrics-\(UUID().uuidString).txt")
            try answer.body.write(to: URL(fileURLWithPath: file))
            let script = """
                import json, sys
                from prometheus_client.parser import text_string_to_metric_families
                families, samples = {}, []
                for family in text_string_to_metric_families(open(sys.argv[1], encoding="utf-8").read()):
                    families[family.name] = family.type
                    for sample in family.samples:
                        samples.append([sample.name, sample.labels, sample.value])
                print(json.dumps({"families": families, "samples": samples}))
                """
            let parser = try HelperProcess(
                ["python3", "-c", script, file], executable: URL(fileURLWithPath: "/usr/bin/env"))
            _ = await parser.finish(limit: 60)
            let parsed = try #require(
                (try? JSONSerialization.jsonObject(with: Data(parser.stdout.utf8))) as? [String: Any],
                "prometheus_client could not parse /metrics: \(parser.stderr.suffix(2000))\n\(answer.text.prefix(3000))"
            )
            let samples = (parsed["samples"] as? [[Any]] ?? []).compactMap { sample -> PrometheusText.Sample? in
                guard sample.count == 3, let name = sample[0] as? String, let labels = sample[1] as? [String: String],
                    let value = (sample[2] as? NSNumber)?.doubleValue
                else { return nil }
                return PrometheusText.Sample(name: name, labels: labels, value: value)
            }
            return PrometheusText(families: parsed["families"] as? [String: String] ?? [:], samples: samples)
        }

        @Test("The page, its files, the status and health answer, with their types and headers")
        func pageAndReads() async throws {
            try await withServer { server in
                let page = try await server.get("/")
                #expect(page.status == 200 && page.header("Content-Type") == "text/html; charset=utf-8")
                #expect(page.header("Content-Security-Policy")?.contains("script-src 'self'") == true)
                #expect(page.text.contains("id=\"countdowns\"") && page.text.contains("dashboard.js"))
                let script = try await server.get("/dashboard.js")
                #expect(script.status == 200 && script.header("Content-Type")?.hasPrefix("text/javascript") == true)
                let style = try await server.get("/dashboard.css")
                #expect(style.status == 200 && style.header("Content-Type")?.hasPrefix("text/css") == true)
                // Exactly the files of Sources/CountdownStoreServer/Dashboard/, built into the binary.
                let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                    .deletingLastPathComponent().deletingLastPathComponent()
                    .appendingPathComponent("Sources/CountdownStoreServer/Dashboard")
                for (answer, file) in [(page, "index.html"), (script, "dashboard.js"), (style, "dashboard.css")] {
                    let source = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
                    #expect(answer.text == source, "\(file) is served byte for byte")
                }
                let status = try await server.get("/api/status")
                #expect(status.status == 200, "\(status.summary)")
                #expect(status.object?["read_only"] as? Bool == false)
                #expect(status.object?["version"] as? String == CountdownStoreCore.CountdownStore.version, "\(status.summary)")
                #expect(
                    (status.object?["lease"] as? [String: Any])?["this_server"] as? Bool == true, "\(status.summary)")
                #expect(status.header("X-Countdown-Now-Ms") != nil)
                let health = try await server.get("/healthz")
                #expect(health.status == 200, "\(health.summary)")
            }
        }

        @Test("SIGTERM stops the server within 10 s while an event stream is open, and the stream ends")
        func stopsWithOpenStream() async throws {
            let server = try await ServeProcess.start(database: db, folder: folder, arguments: ["--token", Self.token])
            let stream: HTTPStream
            do {
                stream = try await HTTPStream.open(port: server.port, "/api/stream")
                let opened = try await stream.read(limit: 10) { $0.contains(": connected") }
                #expect(opened, "the stream opens: \(stream.text)")
            } catch {
                await server.stop()
                throw error
            }
            server.helper.kill(SIGTERM)
            let stopped = await waitForExit(server.helper, limit: 10)
            if !stopped { killGroup(server.helper.process.processIdentifier) }
            _ = await server.helper.finish(limit: 10, status: stopped ? 0 : nil)
            #expect(
                stopped,
                "countdown serve did not stop within 10 s of SIGTERM; stderr: \(server.helper.stderr.suffix(2000))")
            let more = try await stream.read(limit: 5) { _ in false }
            #expect(!more)
            #expect(stream.ended, "the stream ended with the server")
        }
    }
}

/// The keys of the `items` of a list or events answer.
func itemKeys(_ answer: HTTPAnswer) -> [String]? {
    (answer.object?["items"] as? [[String: Any]])?.compactMap { $0["key"] as? String }
}

/// One message of a server-sent event stream: its `id:` and its `data:` as JSON.
struct StreamEvent {
    var id: Int?
    var json: [String: Any]
    var key: String? { json["key"] as? String }
    var event: String? { json["event"] as? String }
}

/// The complete messages of an event stream's text (comments and partial messages left out).
func streamEvents(_ text: String) -> [StreamEvent] {
    text.components(separatedBy: "\n\n").dropLast().compactMap { block in
        var id: Int?
        var data: String?
        for line in block.split(separator: "\n") {
            if line.hasPrefix("id: ") { id = Int(line.dropFirst(4)) }
            if line.hasPrefix("data: ") { data = String(line.dropFirst(6)) }
        }
        guard let data, let json = (try? JSONSerialization.jsonObject(with: Data(data.utf8))) as? [String: Any] else {
            return nil
        }
        return StreamEvent(id: id, json: json)
    }
}

/// Metrics as prometheus_client's parser read them.
struct PrometheusText {
    struct Sample {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    /// Each family's type, by the name the parser gives it.
    var families: [String: String]
    var samples: [Sample]

    /// The value of the sample `name` with exactly `labels`.
    func value(_ name: String, _ labels: [String: String]) -> Double? {
        samples.first { $0.name == name && $0.labels == labels }?.value
    }

    func sum(_ name: String) -> Double {
        samples.filter { $0.name == name }.reduce(0) { $0 + $1.value }
    }
}
