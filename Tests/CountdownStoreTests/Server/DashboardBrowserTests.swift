import Foundation
import Testing

extension RealProcesses {
    /// The dashboard of `countdown serve --token T` in headless Chromium, driven through chromedriver
    /// (W3C WebDriver), with the tool writing the same file from other processes.
    ///
    /// `COUNTDOWN_SCREENSHOT=FILE` saves a screenshot of the page (the README's picture).
    @Suite(
        "countdown serve: the dashboard in a browser",
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: chromedriverBinary.path)
                && FileManager.default.isExecutableFile(atPath: countdownBinary.path),
            "needs /usr/bin/chromedriver (Debian's chromium-driver)"),
        .timeLimit(.minutes(5)))
    struct DashboardBrowserTests {
        static let token = "dashboard-token-for-the-tests"
        static let hostileKey = "<img src=x onerror=alert(1)></script>"

        let folder: TemporaryFolder
        var db: String { folder.path("dashboard.sqlite") }

        init() throws {
            folder = try TemporaryFolder()
        }

        @discardableResult
        func countdown(_ arguments: [String]) async throws -> ToolRun {
            let run = try await runCountdown(db, arguments)
            #expect(run.status == 0, "countdown \(arguments.prefix(3).joined(separator: " ")): \(run.stderr)")
            return run
        }

        /// A server with the token and a browser, for as long as `body` runs; both stopped after
        /// it (also when it throws: then with the server's stderr).
        func withDashboard(_ body: (ServeProcess, WebDriverSession) async throws -> Void) async throws {
            let server = try await ServeProcess.start(database: db, folder: folder, arguments: ["--token", Self.token])
            do {
                try await withBrowser { browser in try await body(server, browser) }
            } catch {
                await server.stop()
                Issue.record("failed with \(error); countdown serve's stderr: \(server.helper.stderr.suffix(2000))")
                throw error
            }
            await server.stop()
        }

        /// Loads the page and waits (at most 15 s) until its event stream is live and its list loaded.
        func open(_ browser: WebDriverSession, _ server: ServeProcess) async throws {
            try await browser.navigate(server.base)
            try await eventually("the page is live and its list loaded", limit: 15) {
                let state =
                    try await browser.execute(
                        "return document.getElementById('connection').getAttribute('data-state') + ' ' + document.getElementById('countdowns').getAttribute('aria-busy')"
                    ) as? String
                return state == "live false"
            }
        }

        /// The `data-key` of every row, in order.
        func rowKeys(_ browser: WebDriverSession) async throws -> [String] {
            var keys: [String] = []
            for row in try await browser.findAll("tr[data-key]") {
                keys.append(try await browser.attribute(row, "data-key") ?? "")
            }
            return keys
        }

        /// The row of `key` (found by comparing attributes, so that any key works).
        func row(_ browser: WebDriverSession, _ key: String) async throws -> String? {
            for row in try await browser.findAll("tr[data-key]") {
                if try await browser.attribute(row, "data-key") == key { return row }
            }
            return nil
        }

        /// The item as the API gives it.
        func item(_ server: ServeProcess, _ key: String) async throws -> [String: Any] {
            let answer = try await server.get("/api/countdowns/\(pathSegment(key))")
            return try #require(answer.object, "\(answer.summary)")
        }

        @Test("The page lists what the tool started, and a row's remaining time counts down")
        func listsAndCounts() async throws {
            try await withDashboard { server, browser in
                try await countdown([
                    "start", "order-1042", "15m", "--group", "payments", "--payload", "{\"order\":1042}",
                ])
                try await countdown(["start", "order-1043", "1h30m", "--group", "payments"])
                try await countdown(["pause", "order-1043"])
                try await countdown(["start", "session-7f3a", "90s", "--group", "sessions"])
                try await countdown(["start", "trial-acme", "2d", "--group", "trials", "--policy", "active"])
                try await countdown(["stopwatch", "build-2231", "--group", "ci"])
                try await countdown(["start", "report-nightly", "8h"])
                let listed = try await countdown(["list", "--json"])
                let expected = (listed.array ?? []).compactMap { $0["key"] as? String }
                #expect(expected.count == 6, "\(listed.stdout)")

                try await open(browser, server)
                try await eventually("every started countdown is listed", limit: 10) {
                    Set(try await rowKeys(browser)) == Set(expected)
                }
                #expect(try await rowKeys(browser) == expected, "in the tool's order")

                let remaining = try await browser.find("tr[data-key=\"order-1042\"] td.remaining")
                let first = try await browser.text(remaining)
                try await Task.sleep(for: .milliseconds(1500))
                let second = try await browser.text(remaining)
                #expect(!first.isEmpty && !second.isEmpty)
                #expect(first != second, "the remaining time moves: \(first) then \(second)")
                #expect(first.hasPrefix("14m ") || first.hasPrefix("15m"), "\(first)")
                let pausedRow = try await browser.find("tr[data-key=\"order-1043\"]")
                #expect(try await browser.attribute(pausedRow, "data-state") == "paused")
                let pausedRemaining = try await browser.text(try await browser.find("td.remaining", in: pausedRow))
                #expect(
                    pausedRemaining.hasPrefix("1h 29m") || pausedRemaining.hasPrefix("1h 30m"), "\(pausedRemaining)")

                let png = try await browser.screenshot()
                #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]), "a PNG")
                if let path = ProcessInfo.processInfo.environment["COUNTDOWN_SCREENSHOT"], !path.isEmpty {
                    try png.write(to: URL(fileURLWithPath: path))
                    print("dashboard screenshot saved to \(path)")
                }
            }
        }

        @Test("A countdown another process starts appears without a reload within a few seconds")
        func appearsLive() async throws {
            try await withDashboard { server, browser in
                try await countdown(["start", "already-there", "15m"])
                try await open(browser, server)
                try await eventually("the first row is listed", limit: 10) {
                    try await rowKeys(browser) == ["already-there"]
                }
                // A mark that a reload would wipe.
                try await browser.execute("window.__notReloaded = 42;")

                let toolStarted = Date()
                try await countdown(["start", "late-comer", "10m"])
                let committed = Date()
                var appeared: Date?
                let deadline = committed.addingTimeInterval(5)
                while Date() < deadline {
                    if try await browser.execute(
                        "return document.querySelector('tr[data-key=\"late-comer\"]') !== null") as? Bool == true
                    {
                        appeared = Date()
                        break
                    }
                    try await Task.sleep(for: .milliseconds(25))
                }
                guard let appeared else {
                    let shown = try await rowKeys(browser)
                    let connection = try await browser.execute(
                        "return document.getElementById('connection').textContent")
                    Issue.record(
                        "late-comer did not appear within 5 s; the rows: \(shown), the stream: \(String(describing: connection))"
                    )
                    return
                }
                let seconds = appeared.timeIntervalSince(committed)
                print(
                    "dashboard: late-comer appeared \(String(format: "%.3f", seconds)) s after `countdown start` returned "
                        + "(the tool ran \(String(format: "%.3f", committed.timeIntervalSince(toolStarted))) s)")
                #expect(seconds <= 3, "appeared after \(seconds) s")
                #expect(try await browser.execute("return window.__notReloaded") as? Int == 42, "no reload")
                #expect(try await rowKeys(browser) == ["late-comer", "already-there"], "sorted: soonest first")
            }
        }

        @Test(
            "A button is refused without the token (the page says a token is needed, nothing changes) and works with it"
        )
        func buttonsNeedTheToken() async throws {
            try await withDashboard { server, browser in
                try await countdown(["start", "tap", "15m"])
                // A fresh page: no token.
                try await open(browser, server)
                try await eventually("the row is listed", limit: 10) { try await row(browser, "tap") != nil }
                #expect(try await browser.text(try await browser.find("#token-state")) == "no token")
                try await browser.click(try await browser.find("tr[data-key=\"tap\"] [data-action=\"pause\"]"))
                try await eventually("the error banner shows", limit: 5) {
                    try await browser.execute("return document.getElementById('error').hidden") as? Bool == false
                }
                let message = try await browser.text(try await browser.find("#error-text"))
                #expect(message.contains("token"), "\(message)")
                #expect(try await item(server, "tap")["state"] as? String == "running", "nothing changed")
                #expect(try await countdown(["show", "tap", "--json"]).object?["state"] as? String == "running")
                #expect(
                    try await browser.attribute(try await browser.find("tr[data-key=\"tap\"]"), "data-state")
                        == "running")

                // With the token.
                try await browser.click(try await browser.find("#error-close"))
                try await browser.sendKeys(try await browser.find("#token"), Self.token)
                try await browser.click(try await browser.find("#token-save"))
                try await eventually("the token is taken", limit: 5) {
                    try await browser.text(try await browser.find("#token-state")) == "writes enabled"
                }
                try await browser.click(try await browser.find("tr[data-key=\"tap\"] [data-action=\"pause\"]"))
                try await eventually("the API shows tap paused", limit: 5) {
                    try await item(server, "tap")["state"] as? String == "paused"
                }
                try await eventually("the row shows it paused", limit: 5) {
                    try await browser.attribute(try await browser.find("tr[data-key=\"tap\"]"), "data-state")
                        == "paused"
                }
                #expect(
                    try await browser.execute("return document.getElementById('error').hidden") as? Bool == true,
                    "no error")
                #expect(try await countdown(["show", "tap", "--json"]).object?["state"] as? String == "paused")
            }
        }

        @Test("A debounce shows its rule and its bound under its deadline, a cooldown its rule, a plain one neither")
        func rulesAndBound() async throws {
            try await withDashboard { server, browser in
                let debounced = try await server.post(
                    "/api/countdowns/cart-mail/debounce", jsonBody(["quiet": "10m", "max_wait": "30m"]),
                    token: Self.token)
                let boundAt = try #require(debounced.object?["bound_at"] as? String, "\(debounced.summary)")
                let cooldown = try await server.post(
                    "/api/countdowns/resend/cooldown", jsonBody(["duration": "1h"]), token: Self.token)
                #expect(cooldown.status == 200, "\(cooldown.summary)")
                try await countdown(["start", "plain", "20m"])
                try await open(browser, server)
                try await eventually("the three rows are listed", limit: 10) {
                    Set(try await rowKeys(browser)) == ["cart-mail", "resend", "plain"]
                }

                // The bound as the page shows a time: the time of day, with the date when not today.
                let script = """
                    const d = new Date(arguments[0]);
                    const time = { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' };
                    const today = d.toDateString() === new Date().toDateString();
                    const options = today ? time : { year: 'numeric', month: '2-digit', day: '2-digit', ...time };
                    return new Intl.DateTimeFormat(undefined, options).format(d);
                    """
                let local = try #require(try await browser.execute(script, [boundAt]) as? String)
                let bound = try await browser.find("tr[data-key=\"cart-mail\"] td.deadline .bound")
                #expect(try await browser.text(bound) == "bound ≤ \(local)", "the bound \(boundAt)")
                let rule = try await browser.find("tr[data-key=\"cart-mail\"] td.kind .rule")
                #expect(try await browser.text(rule) == "debounce")
                let cooldownRule = try await browser.find("tr[data-key=\"resend\"] td.kind .rule")
                #expect(try await browser.text(cooldownRule) == "cooldown")
                let hidden = """
                    return ['resend', 'plain'].map((key) => {
                      const row = document.querySelector(`tr[data-key="${key}"]`);
                      return [row.querySelector('.bound').hidden, row.querySelector('.rule').hidden];
                    });
                    """
                let flags = try await browser.execute(hidden) as? [[Bool]]
                #expect(flags == [[true, false], [true, true]], "no bound but for the debounce, no rule for plain")
            }
        }

        @Test("A hostile key renders as text: exactly the key, no element made of it, no script run")
        func hostileKeyIsText() async throws {
            try await withDashboard { server, browser in
                let slashed = "team a/order 7 & <b>bold</b>"
                try await countdown(["start", Self.hostileKey, "15m", "--group", "<i>group</i>"])
                try await countdown(["start", slashed, "20m"])
                try await open(browser, server)
                try await eventually("both rows are listed", limit: 10) {
                    Set(try await rowKeys(browser)) == [Self.hostileKey, slashed]
                }
                // From now on, an alert would be recorded rather than shown.
                try await browser.execute("window.alert = function () { window.__alerted = true; };")

                let hostileRow = try #require(try await row(browser, Self.hostileKey))
                let keyCell = try await browser.find("td.key", in: hostileRow)
                #expect(try await browser.text(keyCell) == Self.hostileKey)
                #expect(
                    try await browser.execute(
                        "return arguments[0].textContent", [[WebDriverSession.elementKey: keyCell]]) as? String
                        == Self.hostileKey)
                #expect(try await browser.text(try await browser.find("td.group", in: hostileRow)) == "<i>group</i>")
                let slashedRow = try #require(try await row(browser, slashed))
                #expect(try await browser.text(try await browser.find("td.key", in: slashedRow)) == slashed)

                // The hostile row's detail, and a button on it (the key percent-encoded in the path).
                try await browser.click(try await browser.find("button[data-open]", in: hostileRow))
                try await eventually("the detail opens", limit: 5) {
                    try await browser.execute("return document.getElementById('detail').hidden") as? Bool == false
                }
                // The panel slides in from opacity 0, and WebDriver's text is what is visible: wait for it.
                try await eventually("the detail's title shows the key", limit: 5) {
                    try await browser.text(try await browser.find("#detail-title")) == Self.hostileKey
                }
                #expect(
                    try await browser.execute("return document.getElementById('detail-title').textContent") as? String
                        == Self.hostileKey)
                try await browser.click(try await browser.find("#detail-close"))
                try await browser.sendKeys(try await browser.find("#token"), Self.token)
                try await browser.click(try await browser.find("#token-save"))
                try await browser.click(try await browser.find("[data-action=\"pause\"]", in: hostileRow))
                try await eventually("the API shows the hostile key paused", limit: 5) {
                    try await item(server, Self.hostileKey)["state"] as? String == "paused"
                }
                let slashedNow = try #require(try await row(browser, slashed))
                try await browser.click(try await browser.find("[data-action=\"pause\"]", in: slashedNow))
                try await eventually("the API shows the slashed key paused", limit: 5) {
                    try await item(server, slashed)["state"] as? String == "paused"
                }

                #expect(try await browser.alertText() == nil, "no alert is open")
                #expect(
                    try await browser.execute("return window.__alerted === undefined") as? Bool == true,
                    "alert was never called")
                #expect(
                    try await browser.execute("return document.querySelectorAll('img, script:not([src]), b, i').length")
                        as? Int == 0)
                #expect(
                    try await browser.execute("return document.querySelectorAll('#countdowns img').length") as? Int == 0
                )
                #expect(try await browser.execute("return document.getElementById('error').hidden") as? Bool == true)
            }
        }
    }
}
