import Foundation
import Testing

@testable import CountdownStoreServer

/// `Retry-After` of a cooldown that is still running: whole seconds, rounded up, never 0.
@Suite("countdown serve: a cooldown's Retry-After")
struct ServerRuleRetryAfterTests {
    @Test("Whole seconds, rounded up, at least 1")
    func roundsUp() {
        let cases: [(Duration, Int64)] = [
            (.zero, 1), (.milliseconds(1), 1), (.milliseconds(999), 1), (.seconds(1), 1),
            (.milliseconds(1001), 2), (.milliseconds(59_999), 60), (.seconds(60), 60), (.seconds(-3), 1),
        ]
        for (remaining, seconds) in cases {
            #expect(CooldownJSON.retryAfter(remaining) == seconds, "\(remaining)")
        }
    }
}

extension RealProcesses {
    /// Cooldowns and debounce through the HTTP API of `countdown serve`, over real HTTP on 127.0.0.1.
    @Suite(
        "countdown serve: cooldowns and debounce",
        .enabled(if: FileManager.default.isExecutableFile(atPath: countdownBinary.path)),
        .timeLimit(.minutes(5)))
    struct ServerRuleTests {
        static let token = "s3cret-token-for-the-rule-tests"

        let folder: TemporaryFolder
        var db: String { folder.path("rules.sqlite") }

        init() throws {
            folder = try TemporaryFolder()
        }

        func withServer(_ body: (ServeProcess) async throws -> Void) async throws {
            try await withServeProcess(database: db, folder: folder, arguments: ["--token", Self.token], body)
        }

        /// `POST path` with `fields` as its JSON body and the token.
        func post(_ server: ServeProcess, _ path: String, _ fields: [String: String]) async throws -> HTTPAnswer {
            try await server.post(path, jsonBody(fields), token: Self.token)
        }

        /// Whether the key holds nothing, as the API sees it (404).
        func isAbsent(_ server: ServeProcess, _ key: String) async throws -> Bool {
            let answer = try await server.get("/api/countdowns/\(pathSegment(key))")
            return answer.status == 404 && answer.error?.code == "notFound"
        }

        @Test("A cooldown: 200 and allowed, then 429 with Retry-After the time left rounded up; paused, no end")
        func cooldown() async throws {
            try await withServer { server in
                let path = "/api/countdowns/resend-code/cooldown"
                let first = try await post(server, path, ["duration": "1h", "group": "otp", "payload": "+1555"])
                #expect(first.status == 200, "\(first.summary)")
                #expect(first.header("Retry-After") == nil && first.header("X-Countdown-Now-Ms") != nil)
                let allowed = try #require(first.object, "\(first.summary)")
                #expect(Set(allowed.keys) == ["allowed", "countdown"], "\(first.summary)")
                #expect(allowed["allowed"] as? Bool == true)
                let started = try #require(allowed["countdown"] as? [String: Any])
                #expect(Set(started.keys) == apiItemFields, "\(started.keys.sorted())")
                #expect(started["rule"] as? String == "cooldown" && started["state"] as? String == "running")
                #expect(started["duration_ms"] as? Int == 3_600_000 && started["group"] as? String == "otp")
                #expect(started["payload"] as? String == "+1555")
                #expect(started["max_wait_ms"] is NSNull && started["bound_at"] is NSNull)

                // Again, by its path and by the query: refused with the time left; nothing changes.
                for again in [path, "/api/item/cooldown?key=resend-code"] {
                    let answer = try await post(server, again, ["duration": "5m", "payload": "other"])
                    #expect(answer.status == 429, "\(again): \(answer.summary)")
                    let body = try #require(answer.object, "\(answer.summary)")
                    #expect(Set(body.keys) == ["allowed", "remaining_ms", "ends_at", "countdown"])
                    #expect(body["allowed"] as? Bool == false)
                    let remaining = try #require(body["remaining_ms"] as? Int, "\(answer.summary)")
                    #expect(remaining > 0 && remaining <= 3_600_000, "\(remaining)")
                    let retryAfter = try #require(answer.header("Retry-After"), "\(answer.summary)")
                    let seconds = try #require(Int(retryAfter), "Retry-After \(retryAfter)")
                    #expect(seconds >= 1 && seconds == (remaining + 999) / 1000, "\(retryAfter) for \(remaining) ms")
                    let countdown = try #require(body["countdown"] as? [String: Any])
                    #expect(body["ends_at"] as? String == countdown["deadline_at"] as? String)
                    #expect(body["ends_at"] as? String == started["deadline_at"] as? String)
                    #expect(countdown["payload"] as? String == "+1555" && countdown["duration_ms"] as? Int == 3_600_000)
                    #expect(countdown["generation"] as? Int == started["generation"] as? Int)
                    #expect(answer.header("X-Countdown-Now-Ms") != nil)
                }

                // Paused: still cooling down, with no end.
                #expect(try await server.post("/api/countdowns/resend-code/pause", token: Self.token).status == 200)
                let paused = try await post(server, path, ["duration": "1h"])
                #expect(paused.status == 429, "\(paused.summary)")
                #expect(paused.object?["ends_at"] is NSNull, "\(paused.summary)")
                let pausedLeft = try #require(paused.object?["remaining_ms"] as? Int)
                #expect(paused.header("Retry-After") == String((pausedLeft + 999) / 1000))

                // Cancelled: the next cooldown is allowed, in a new generation.
                #expect(try await server.post("/api/countdowns/resend-code/cancel", token: Self.token).status == 200)
                let next = try await post(server, path, ["duration": "90s"])
                #expect(next.status == 200 && next.object?["allowed"] as? Bool == true, "\(next.summary)")
                let again = try #require(next.object?["countdown"] as? [String: Any])
                #expect(again["duration_ms"] as? Int == 90_000)
                #expect(again["generation"] as? Int ?? 0 > started["generation"] as? Int ?? 0)

                // The list and the item carry the rule.
                let listed = try await server.get("/api/countdowns")
                let items = try #require(listed.object?["items"] as? [[String: Any]], "\(listed.summary)")
                #expect(items.count == 1 && items.first?["rule"] as? String == "cooldown", "\(listed.summary)")
                let method = try await server.get(path)
                #expect(method.status == 405 && method.header("Allow") == "POST", "\(method.summary)")
            }
        }

        @Test("A debounce: 200 with the item; a second call moves deadline_at, never past bound_at; one generation")
        func debounce() async throws {
            try await withServer { server in
                let path = "/api/countdowns/cart-mail/debounce"
                let first = try await post(server, path, ["quiet": "10m", "max_wait": "1h", "payload": "cart 1"])
                #expect(first.status == 200, "\(first.summary)")
                let item = try #require(first.object, "\(first.summary)")
                #expect(Set(item.keys) == apiItemFields, "\(item.keys.sorted())")
                #expect(item["rule"] as? String == "debounce" && item["state"] as? String == "running")
                #expect(item["duration_ms"] as? Int == 600_000 && item["max_wait_ms"] as? Int == 3_600_000)
                let startedAt = try #require(instant(item["started_at"]))
                let firstDeadline = try #require(instant(item["deadline_at"]))
                let bound = try #require(instant(item["bound_at"]), "\(first.summary)")
                #expect(bound.timeIntervalSince(startedAt) == 3600, "bound_at is max_wait after the start")

                // A longer quiet period moves the deadline later, whatever time passed in between.
                let second = try await post(server, path, ["quiet": "20m", "max_wait": "2h", "payload": "cart 2"])
                #expect(second.status == 200, "\(second.summary)")
                let moved = try #require(second.object, "\(second.summary)")
                let secondDeadline = try #require(instant(moved["deadline_at"]))
                #expect(secondDeadline > firstDeadline, "\(firstDeadline) then \(secondDeadline)")
                #expect(secondDeadline.timeIntervalSince(startedAt) >= 1200)
                #expect(moved["bound_at"] as? String == item["bound_at"] as? String, "the burst keeps its bound")
                #expect(moved["max_wait_ms"] as? Int == 3_600_000, "and its first call's maximum wait")
                #expect(moved["generation"] as? Int == item["generation"] as? Int)
                #expect(moved["payload"] as? String == "cart 2", "the last call's payload wins")

                // A quiet period past the bound stops at it (the key in the query this time).
                let capped = try await post(
                    server, "/api/item/debounce?key=cart-mail", ["quiet": "3h", "max_wait": "3h"])
                #expect(capped.status == 200, "\(capped.summary)")
                #expect(capped.object?["deadline_at"] as? String == item["bound_at"] as? String, "\(capped.summary)")
                #expect(capped.object?["duration_ms"] as? Int == 3_600_000)

                let shown = try await server.get("/api/countdowns/cart-mail")
                #expect(shown.object?["bound_at"] as? String == item["bound_at"] as? String, "\(shown.summary)")
                let events = try await server.get("/api/countdowns/cart-mail/events")
                let kinds = (events.object?["items"] as? [[String: Any]])?.compactMap { $0["event"] as? String }
                #expect(kinds == ["postponed", "postponed", "started"], "\(events.summary)")
            }
        }

        @Test("Bad input is refused with 400 naming the value, and nothing is written")
        func badInput() async throws {
            try await withServer { server in
                let refused: [(path: String, body: [String: String], code: String, names: [String])] = [
                    (
                        "/api/countdowns/a/debounce", ["quiet": "10m", "max_wait": "5m"], "invalidDuration",
                        ["maximum wait", "5m00s", "10m00s"]
                    ),
                    ("/api/countdowns/a/cooldown", ["duration": "0s"], "invalidDuration", ["'0s'"]),
                    ("/api/countdowns/a/cooldown", ["duration": "15x"], "invalidDuration", ["'15x'"]),
                    ("/api/countdowns/a/cooldown", [:], "invalidDuration", ["missing duration"]),
                    (
                        "/api/countdowns/a/cooldown", ["duration": "1m", "policy": "sometimes"], "invalidArgument",
                        ["policy", "'sometimes'"]
                    ),
                    (
                        "/api/countdowns/a/debounce", ["quiet": "0s", "max_wait": "1m"], "invalidDuration",
                        ["quiet", "'0s'"]
                    ),
                    (
                        "/api/countdowns/a/debounce", ["quiet": "1m", "max_wait": "soon"], "invalidDuration",
                        ["max_wait", "'soon'"]
                    ),
                    ("/api/countdowns/a/debounce", ["quiet": "1m"], "invalidDuration", ["missing max_wait"]),
                    ("/api/item/debounce?key=a", ["max_wait": "1m"], "invalidDuration", ["missing quiet"]),
                ]
                for (path, body, code, names) in refused {
                    let answer = try await post(server, path, body)
                    #expect(answer.status == 400 && answer.error?.code == code, "\(path) \(body): \(answer.summary)")
                    for name in names {
                        #expect(answer.error?.message.contains(name) == true, "\(name) in \(answer.summary)")
                    }
                    #expect(try await isAbsent(server, "a"), "\(path) \(body) wrote nothing")
                }
                let notJSON = try await server.post("/api/countdowns/a/cooldown", Data("{".utf8), token: Self.token)
                #expect(notJSON.status == 400 && notJSON.error?.code == "invalidArgument", "\(notJSON.summary)")
                let badGroup = try await post(server, "/api/countdowns/a/cooldown", ["duration": "1m", "group": ""])
                #expect(badGroup.status == 400 && badGroup.error?.code == "invalidGroup", "\(badGroup.summary)")
                #expect(try await isAbsent(server, "a"))
            }
        }

        @Test("A key holding another kind of item is refused with 409 naming it, and the item stays as it was")
        func wrongRule() async throws {
            try await withServer { server in
                let plain = try await post(server, "/api/countdowns", ["key": "plain", "duration": "15m"])
                #expect(plain.status == 200, "\(plain.summary)")
                let cooling = try await post(server, "/api/countdowns/cooling/cooldown", ["duration": "15m"])
                #expect(cooling.status == 200, "\(cooling.summary)")
                let refused: [(path: String, body: [String: String], names: [String])] = [
                    ("/api/countdowns/plain/cooldown", ["duration": "1m"], ["'plain'", "a plain countdown"]),
                    (
                        "/api/countdowns/plain/debounce", ["quiet": "1m", "max_wait": "5m"],
                        ["'plain'", "a plain countdown"]
                    ),
                    (
                        "/api/item/debounce?key=cooling", ["quiet": "1m", "max_wait": "5m"],
                        ["'cooling'", "a cooldown"]
                    ),
                ]
                for (path, body, names) in refused {
                    let answer = try await post(server, path, body)
                    #expect(answer.status == 409 && answer.error?.code == "wrongState", "\(path): \(answer.summary)")
                    for name in names {
                        #expect(answer.error?.message.contains(name) == true, "\(name) in \(answer.summary)")
                    }
                }
                let item = try #require(try await server.get("/api/countdowns/plain").object)
                #expect(item["rule"] is NSNull && item["duration_ms"] as? Int == 900_000, "\(item)")
                #expect(item["generation"] as? Int == plain.object?["generation"] as? Int)
                let events = try await server.get("/api/countdowns/plain/events")
                #expect(itemKeys(events)?.count == 1, "one event, the start: \(events.summary)")
            }
        }

        @Test("A cross-site or token-less cooldown or debounce is refused like any write, and changes nothing")
        func refusedWrites() async throws {
            try await withServer { server in
                let writes: [(String, [String: String])] = [
                    ("/api/countdowns/x/cooldown", ["duration": "1m"]),
                    ("/api/item/cooldown?key=x", ["duration": "1m"]),
                    ("/api/countdowns/x/debounce", ["quiet": "1m", "max_wait": "5m"]),
                    ("/api/item/debounce?key=x", ["quiet": "1m", "max_wait": "5m"]),
                ]
                let crossSite: [[String: String]] = [
                    ["Origin": "http://evil.example"], ["Sec-Fetch-Site": "cross-site"],
                ]
                for (path, body) in writes {
                    for headers in crossSite {
                        let answer = try await server.post(path, jsonBody(body), token: Self.token, headers: headers)
                        #expect(answer.status == 403 && answer.error?.code == "crossSite", "\(path): \(answer.summary)")
                    }
                    let plainText = try await server.post(
                        path, jsonBody(body), token: Self.token, headers: ["Content-Type": "text/plain"])
                    #expect(plainText.status == 415, "\(path): \(plainText.summary)")
                    let noToken = try await server.post(path, jsonBody(body))
                    #expect(noToken.status == 401 && noToken.error?.code == "unauthorized", "\(noToken.summary)")
                }
                #expect(try await isAbsent(server, "x"))
                let unknown = try await post(server, "/api/countdowns/x/frobnicate", [:])
                #expect(unknown.status == 404 && unknown.error?.message.contains("cooldown, debounce") == true)
            }
        }
    }
}

/// An ISO-8601 instant of the API's JSON.
private func instant(_ value: Any?) -> Date? {
    guard let text = value as? String else { return nil }
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.date(from: text)
}
