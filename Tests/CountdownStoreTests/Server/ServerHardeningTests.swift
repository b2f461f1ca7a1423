import Foundation
import Logging
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreServer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension RealProcesses {
    /// `countdown serve` in front of hostile clients: a page that rebinds its name to 127.0.0.1,
    /// cross-site writes, streams that never read, clients that never finish their request, and
    /// tokens that are no secret. Real processes, real HTTP on 127.0.0.1.
    @Suite(
        "countdown serve: hostile clients",
        .enabled(if: FileManager.default.isExecutableFile(atPath: countdownBinary.path)),
        .timeLimit(.minutes(5)))
    struct ServerHardeningTests {
        static let token = "a-token-long-enough-to-be-secret"

        let folder: TemporaryFolder
        var db: String { folder.path("serve.sqlite") }

        init() throws {
            folder = try TemporaryFolder()
        }

        func withServer(_ arguments: [String] = ["--token", ServerHardeningTests.token], _ body: (ServeProcess) async throws -> Void)
            async throws
        {
            try await withServeProcess(database: db, folder: folder, arguments: arguments, body)
        }

        func keys() async throws -> [String] {
            let listed = try await runCountdown(db, ["list", "--state", "all", "--json"])
            return (listed.array ?? []).compactMap { $0["key"] as? String }.sorted()
        }

        @Test("A Host that is not the server's own is refused with 421 before any route runs; its own names answer")
        func onlyItsOwnNames() async throws {
            _ = try await runCountdown(db, ["start", "secret-order", "1h", "--payload", "card 4242"])
            try await withServer(["--token", Self.token, "--allow-host", "ops.example.com"]) { server in
                for host in ["rebind.attacker.example:\(server.port)", "attacker.example", "ops.example.com.attacker.example", "127.0.0.1.nip.io"] {
                    for path in ["/api/countdowns?state=all", "/api/status", "/api/stream", "/metrics", "/healthz", "/"] {
                        let answer = try await server.get(path, headers: ["Host": host])
                        #expect(answer.status == 421, "\(host) \(path): \(answer.summary)")
                        #expect(answer.error?.code == "unknownHost" && !answer.text.contains("secret-order"), "\(answer.summary)")
                    }
                    let write = try await server.post(
                        "/api/countdowns", jsonBody(["key": "rebound", "duration": "1m"]), token: Self.token, headers: ["Host": host])
                    #expect(write.status == 421, "\(write.summary)")
                    #expect(write.error?.message.contains(String(host.prefix(20))) == true, "the refusal names the host: \(write.summary)")
                }
                for host in ["127.0.0.1:\(server.port)", "localhost:\(server.port)", "LOCALHOST", "app.localhost:\(server.port)", "[::1]:\(server.port)", "ops.example.com", "ops.example.com:443"] {
                    let answer = try await server.get("/api/countdowns?state=all", headers: ["Host": host])
                    #expect(answer.status == 200 && answer.text.contains("secret-order"), "\(host): \(answer.summary)")
                }
            }
            #expect(try await keys() == ["secret-order"], "nothing was written through a foreign Host")
        }

        @Test("A cross-site form post, a no-cors fetch's text/plain body and a foreign Origin are refused and change nothing")
        func noCrossSiteWrites() async throws {
            try await withServer { server in
                let body = jsonBody(["key": "forged", "duration": "1m"])
                let refused: [(headers: [String: String], status: Int, code: String)] = [
                    (["Content-Type": "application/x-www-form-urlencoded"], 415, "notJSON"),
                    (["Content-Type": "text/plain"], 415, "notJSON"),
                    (["Content-Type": "multipart/form-data; boundary=x"], 415, "notJSON"),
                    (["Content-Type": "application/json", "Origin": "http://evil.example"], 403, "crossSite"),
                    (["Content-Type": "application/json", "Origin": "null"], 403, "crossSite"),
                    (["Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"], 403, "crossSite"),
                    (["Content-Type": "application/json", "Sec-Fetch-Site": "same-site"], 403, "crossSite"),
                ]
                for (headers, status, code) in refused {
                    let answer = try await server.post("/api/countdowns", body, token: Self.token, headers: headers)
                    #expect(answer.status == status && answer.error?.code == code, "\(headers): \(answer.summary)")
                }
                // Body-less writes need the JSON type too.
                _ = try await server.post("/api/countdowns", jsonBody(["key": "kept", "duration": "1h"]), token: Self.token)
                let pause = try await server.post("/api/countdowns/kept/pause", token: Self.token, headers: ["Content-Type": "text/plain"])
                #expect(pause.status == 415, "\(pause.summary)")
                let item = try await server.get("/api/countdowns/kept")
                #expect(item.object?["state"] as? String == "running", "\(item.summary)")
                // The server's own page, and a program without Origin, write.
                let own = try await server.post(
                    "/api/countdowns/kept/pause", token: Self.token,
                    headers: ["Origin": "http://127.0.0.1:\(server.port)", "Sec-Fetch-Site": "same-origin"])
                #expect(own.status == 200, "\(own.summary)")
            }
            #expect(try await keys() == ["kept"])
        }

        @Test("A token too short to be a secret is refused at start; a token file is read; a non-loopback address needs --behind-tls-proxy")
        func tokens() async throws {
            let short = try await runCountdown(db, ["serve", "--port", "0", "--token", "short-token"])
            #expect(short.status != 0 && short.stderr.contains("11 characters") && !short.stderr.contains("short-token"), "\(short.stderr)")
            let file = folder.path("token")
            try Data((Self.token + "\n").utf8).write(to: URL(fileURLWithPath: file))
            try await withServer(["--token-file", file]) { server in
                let denied = try await server.post("/api/countdowns", jsonBody(["key": "a", "duration": "1m"]), token: "wrong-token-of-some-length")
                #expect(denied.status == 401, "\(denied.summary)")
                let allowed = try await server.post("/api/countdowns", jsonBody(["key": "a", "duration": "1m"]), token: Self.token)
                #expect(allowed.status == 201 || allowed.status == 200, "\(allowed.summary)")
            }
            let missing = try await runCountdown(db, ["serve", "--port", "0", "--token-file", folder.path("nothing")])
            #expect(missing.status != 0 && missing.stderr.contains("--token-file"), "\(missing.stderr)")
            let open = try await runCountdown(db, ["serve", "--port", "0", "--host", "0.0.0.0"])
            #expect(open.status != 0 && open.stderr.contains("--behind-tls-proxy"), "\(open.stderr)")
            let badHost = try await runCountdown(db, ["serve", "--port", "0", "--allow-host", "http://x.example/"])
            #expect(badHost.status != 0 && badHost.stderr.contains("http://x.example/"), "\(badHost.stderr)")
        }

        @Test("Streams beyond the cap get 503 with Retry-After; a client that sends half a request is closed")
        func boundedClients() async throws {
            try await withServer(["--token", Self.token, "--max-streams", "3"]) { server in
                let streams = try (0..<3).map { _ in try LocalSocket(port: server.port) }
                for socket in streams {
                    try socket.send(Data("GET /api/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8), until: Date().addingTimeInterval(5))
                    let first = try await receiveText(socket, containing: ": connected", limit: 10)
                    #expect(first.hasPrefix("HTTP/1.1 200"), "\(first.prefix(200))")
                }
                let fourth = try await server.get("/api/stream")
                #expect(fourth.status == 503 && fourth.header("Retry-After") != nil && fourth.error?.code == "tooManyStreams", "\(fourth.summary)")
                withExtendedLifetime(streams) {}

                // Half a request head, then nothing: the server closes the connection.
                let slow = try LocalSocket(port: server.port)
                try slow.send(Data("GET /healthz HTTP/1.1\r\nHost: 127".utf8), until: Date().addingTimeInterval(5))
                #expect(try await closedByPeer(slow, limit: 40), "a client that never finishes its request head is closed")
                let health = try await server.get("/healthz")
                #expect(health.status == 200, "\(health.summary)")
            }
        }

        @Test("2,000 event streams that never read and 300 clients that never finish a request: countdowns still expire, /healthz answers, the slow clients are closed")
        func crowd() async throws {
            // Stopped once, inside, while the crowd is still there.
            let server = try await ServeProcess.start(database: db, folder: folder, arguments: ["--token", Self.token])
            do {
                for index in 0..<40 {
                    let started = try await server.post(
                        "/api/countdowns", jsonBody(["key": "due-\(index)", "duration": "\(4 + index % 5)s"]), token: Self.token)
                    #expect(started.status == 200, "\(started.summary)")
                }
                let idle = try (0..<2000).map { _ in
                    let socket = try LocalSocket(port: server.port)
                    try socket.send(Data("GET /api/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8), until: Date().addingTimeInterval(5))
                    return socket
                }
                let slow = try (0..<300).map { _ in
                    let socket = try LocalSocket(port: server.port)
                    try socket.send(Data("POST /api/countdowns HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le".utf8), until: Date().addingTimeInterval(5))
                    return socket
                }
                for _ in 0..<5 {
                    let health = try await server.get("/healthz")
                    #expect(health.status == 200, "\(health.summary)")
                    try await Task.sleep(for: .seconds(1))
                }
                try await fleetEventually("all 40 countdowns expired", limit: 60) {
                    let page = try await server.get("/api/countdowns?state=expired&limit=100")
                    return (itemKeys(page)?.count ?? 0) == 40
                }
                let rss = (try? String(contentsOfFile: "/proc/\(server.helper.process.processIdentifier)/status", encoding: .utf8))?
                    .split(separator: "\n").first { $0.hasPrefix("VmRSS") } ?? "?"
                var closed = 0
                let deadline = Date().addingTimeInterval(40)
                for socket in slow where try await closedByPeer(socket, limit: max(0.1, deadline.timeIntervalSinceNow)) { closed += 1 }
                #expect(closed == slow.count, "\(closed) of \(slow.count) slow clients closed by the server within 40 s")
                print("countdown serve with 2,000 idle streams and 300 slow clients: 40 countdowns expired, /healthz answered, \(closed) slow clients closed; server \(rss)")
                // SIGTERM with every idle stream still open: the server stops within the bound.
                await server.stop(limit: 20)
                withExtendedLifetime(idle) {}
            } catch {
                await server.stop()
                Issue.record("failed with \(error); countdown serve's stderr: \(server.helper.stderr.suffix(2000))")
                throw error
            }
        }

        @Test("In Chromium: a page on another port posts a form and a no-cors fetch to a server with open writes, a page rebinds its name to 127.0.0.1; nothing is read or written")
        func attackersInABrowser() async throws {
            // The attacker's site: a page served by another server, on another port.
            let site = folder.path("site")
            try FileManager.default.createDirectory(atPath: site, withIntermediateDirectories: true)
            try await withServer(["--open-writes"]) { server in
                let target = "http://127.0.0.1:\(server.port)/api/countdowns"
                let page = """
                    <!doctype html><title>attack</title>
                    <form id="f" method="post" action="\(target)" enctype="text/plain">
                    <input name='{"key":"form-forged","duration":"1h","x":"' value='"}'></form>
                    <script>
                    fetch('\(target)', {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'},
                      body: JSON.stringify({key: 'nocors-forged', duration: '1h'})})
                      .catch(() => {}).finally(() => document.getElementById('f').submit());
                    </script>
                    """
                try Data(page.utf8).write(to: URL(fileURLWithPath: site + "/attack.html"))
                let sitePort = try freeLocalPort()
                let siteServer = try HelperProcess(
                    ["-m", "http.server", String(sitePort), "--bind", "127.0.0.1", "--directory", site],
                    executable: URL(fileURLWithPath: "/usr/bin/python3"))
                defer {
                    siteServer.kill()
                    killGroup(siteServer.process.processIdentifier)
                }
                try await eventually("the attacker's site answers", limit: 20) {
                    (try? await httpRequest(port: sitePort, "GET", "/attack.html", limit: 2))?.status == 200
                }
                try await withBrowser(arguments: ["--host-resolver-rules=MAP rebind.attacker.example 127.0.0.1"]) { browser in
                    try await browser.navigate("http://127.0.0.1:\(sitePort)/attack.html")
                    // The fetch settles, then the form posts: the browser ends on the server's refusal.
                    try await eventually("the form was posted", limit: 20) {
                        ((try? await browser.execute("return location.href")) as? String)?.hasPrefix(target) == true
                    }
                    let refusal = try await browser.execute("return document.body.innerText") as? String ?? ""
                    #expect(
                        refusal.contains("crossSite") || refusal.contains("notJSON"), "the form's post was refused: \(refusal.prefix(300))")

                    // A page whose name now points at 127.0.0.1 gets nothing from the server.
                    try await browser.navigate("http://rebind.attacker.example:\(server.port)/")
                    let rebound = try await browser.execute("return document.body.innerText") as? String ?? ""
                    #expect(rebound.contains("unknownHost") && !rebound.contains("Countdowns"), "\(rebound.prefix(300))")
                    let read = try await browser.execute(
                        "const r = new XMLHttpRequest(); r.open('GET', '/api/countdowns?state=all', false); r.send(); return r.status + ' ' + r.responseText")
                        as? String ?? ""
                    #expect(read.hasPrefix("421"), "\(read.prefix(300))")
                }
                // The server's own page may still write, with JSON.
                let own = try await server.post("/api/countdowns", jsonBody(["key": "own", "duration": "1h"]))
                #expect(own.status == 200, "\(own.summary)")
            }
            #expect(try await keys() == ["own"], "nothing forged was written")
        }

        /// Reads until `text` arrived; what arrived.
        func receiveText(_ socket: LocalSocket, containing text: String, limit: Double) async throws -> String {
            try await onThread {
                Result { () throws -> String in
                    let deadline = Date().addingTimeInterval(limit)
                    var received = Data()
                    while Date() < deadline {
                        guard let data = try socket.receive(until: deadline) else { break }
                        received.append(data)
                        if String(decoding: received, as: UTF8.self).contains(text) { break }
                    }
                    return String(decoding: received, as: UTF8.self)
                }
            }.get()
        }

        /// Whether the peer closed `socket` within `limit` seconds (whatever it sent first is read and dropped).
        func closedByPeer(_ socket: LocalSocket, limit: Double) async throws -> Bool {
            try await onThread {
                Result { () throws -> Bool in
                    let deadline = Date().addingTimeInterval(limit)
                    while Date() < deadline {
                        if try socket.receive(until: deadline) == nil { return true }
                    }
                    return false
                }
            }.get()
        }
    }
}

/// One test drives a socket at a time, from one thread at a time.
extension LocalSocket: @unchecked Sendable {}

/// What a client may learn from a failure: its own mistake, never the server's insides.
@Suite("API errors")
struct APIErrorTests {
    @Test("A storage failure or an unexpected error answers a generic message with a reference, not the detail")
    func failuresLeakNothing() {
        let logger = Logger(label: "test")
        let storage = APIError.from(
            CountdownError(.storageFailure, "could not open /var/lib/secret/store.sqlite: disk I/O error"), logger: logger)
        #expect(storage.status == .serviceUnavailable)
        #expect(!storage.message.contains("/var/lib") && storage.message.contains("reference"), "\(storage.message)")
        struct Odd: Error { var detail = "postgres://admin:hunter2@db.internal" }
        let odd = APIError.from(Odd(), logger: logger)
        #expect(odd.status == .internalServerError && !odd.message.contains("hunter2") && odd.message.contains("reference"), "\(odd.message)")
        let mine = APIError.from(CountdownError(.invalidKey, "invalid key \"\": must not be empty"), logger: logger)
        #expect(mine.status == .badRequest && mine.message.contains("invalid key"))
    }

    @Test("A bearer token is never shown by description")
    func tokenNotShown() {
        let access = CountdownDashboard.WriteAccess.bearerToken("a-token-long-enough-to-be-secret")
        #expect(!"\(access)".contains("secret") && !String(reflecting: access).contains("secret"))
    }

    @Test("Host names: loopback and numeric addresses always, others only when allowed", arguments: [
        ("127.0.0.1:8080", true), ("localhost", true), ("x.localhost:1", true), ("[::1]:80", true), ("10.1.2.3", true),
        ("evil.example", false), ("localhost.evil.example", false), ("", false), ("a b", false), ("999.1.1.1", false),
        ("ops.example.com", true), ("OPS.example.com.", true), ("eu.ops.example.com", false), ("x.apps.example.com:8443", true),
    ])
    func hostNames(host: String, allowed: Bool) {
        let hosts = CountdownDashboard.AllowedHosts.names(["ops.example.com", "*.apps.example.com"])
        #expect(hosts.allows(host) == allowed, "\(host)")
    }
}
