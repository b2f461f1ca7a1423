import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// Two clients for the suites that drive real servers: a small HTTP/1.1 client on sockets to
// 127.0.0.1 (for `countdown serve` and for chromedriver), and a W3C WebDriver client on it.
// Every call is bounded; every blocking read or write runs on a thread of its own (`onThread`),
// never on the tasks' shared threads.

// MARK: - HTTP

/// Why an HTTP exchange or a WebDriver command failed.
struct HTTPFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A complete HTTP answer.
struct HTTPAnswer: Sendable {
    var status: Int
    /// The headers, by lowercased name (a repeated header keeps its last value).
    var headers: [String: String]
    var body: Data

    var text: String { String(decoding: body, as: UTF8.self) }

    func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// The body as a JSON object, if it is one.
    var object: [String: Any]? { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] }

    /// The `{"error": {"code", "message"}}` of a refusal.
    var error: (code: String, message: String)? {
        guard let error = object?["error"] as? [String: Any], let code = error["code"] as? String,
            let message = error["message"] as? String
        else { return nil }
        return (code, message)
    }

    /// The answer in a line, for failure messages.
    var summary: String { "HTTP \(status): \(text.prefix(600))" }
}

/// An HTTP/1.1 response read incrementally: its head, then its body, `Content-Length` or chunked.
struct HTTPResponseReader: Sendable {
    private(set) var raw: [UInt8] = []
    private(set) var status: Int?
    private(set) var headers: [String: String] = [:]
    private var bodyStart: Int?

    mutating func append(_ data: Data) {
        raw.append(contentsOf: data)
        if bodyStart == nil { parseHead() }
    }

    /// The offset of the first `pattern` in `raw` at or after `from`.
    private func offset(of pattern: [UInt8], from: Int) -> Int? {
        guard raw.count >= pattern.count, from <= raw.count - pattern.count else { return nil }
        for start in from...(raw.count - pattern.count) where raw[start..<start + pattern.count].elementsEqual(pattern)
        {
            return start
        }
        return nil
    }

    private mutating func parseHead() {
        guard let end = offset(of: Array("\r\n\r\n".utf8), from: 0) else { return }
        let head = String(decoding: raw[0..<end], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        status = statusLine.count > 1 ? Int(statusLine[1]) : nil
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        bodyStart = end + 4
    }

    /// The body decoded so far, and whether it is complete (without counting on the end of the connection).
    var body: (data: Data, complete: Bool) {
        guard let bodyStart else { return (Data(), false) }
        if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
            var decoded = Data()
            var index = bodyStart
            while let lineEnd = offset(of: Array("\r\n".utf8), from: index) {
                let sizeText = String(decoding: raw[index..<lineEnd], as: UTF8.self)
                guard let size = Int(sizeText.split(separator: ";").first ?? "", radix: 16), size >= 0 else {
                    return (decoded, true)  // not HTTP: take what there is
                }
                if size == 0 { return (decoded, true) }
                let start = lineEnd + 2
                guard raw.count - start >= size + 2 else { break }
                decoded.append(contentsOf: raw[start..<start + size])
                index = start + size + 2
            }
            return (decoded, false)
        }
        let rest = raw[bodyStart...]
        if let length = headers["content-length"].flatMap(Int.init) {
            return (Data(rest.prefix(length)), rest.count >= length)
        }
        return (Data(rest), false)
    }
}

/// A TCP connection to 127.0.0.1, non-blocking underneath, every wait bounded by a deadline.
final class LocalSocket {
    private let descriptor: Int32

    init(port: Int) throws {
        #if canImport(Glibc)
            descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw HTTPFailure("socket: errno \(errno)") }
        #if canImport(Darwin)
            var one: Int32 = 1
            setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port)).bigEndian
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        // A connection to the loopback address is made or refused at once.
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let code = errno
            close(descriptor)
            throw HTTPFailure("cannot connect to 127.0.0.1:\(port): errno \(code)")
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
    }

    deinit { close(descriptor) }

    /// Waits for `events` until `deadline`; whether they came.
    private func wait(_ events: Int32, until deadline: Date) -> Bool {
        while true {
            let left = deadline.timeIntervalSinceNow
            if left <= 0 { return false }
            var entry = pollfd(fd: descriptor, events: Int16(events), revents: 0)
            let ready = poll(&entry, 1, Int32(min(left * 1000, 1000).rounded(.up)))
            if ready > 0 { return true }
            if ready < 0, errno != EINTR { return true }  // the call that follows reports it
        }
    }

    /// Sends all of `data` by `deadline`. A peer that closed early (it answered before reading
    /// everything, as a 413 may) ends the sending without an error: its answer is still read.
    func send(_ data: Data, until deadline: Date) throws {
        var offset = 0
        while offset < data.count {
            guard wait(Int32(POLLOUT), until: deadline) else { throw HTTPFailure("sending timed out") }
            let sent = data.withUnsafeBytes { bytes in
                #if canImport(Glibc)
                    Glibc.send(descriptor, bytes.baseAddress! + offset, data.count - offset, Int32(MSG_NOSIGNAL))
                #else
                    Darwin.send(descriptor, bytes.baseAddress! + offset, data.count - offset, 0)
                #endif
            }
            if sent > 0 {
                offset += sent
            } else if sent < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                continue
            } else if sent < 0, errno == EPIPE || errno == ECONNRESET {
                return
            } else {
                throw HTTPFailure("send: errno \(errno)")
            }
        }
    }

    /// What arrives by `deadline`: `nil` once the peer closed, empty when nothing came in time.
    func receive(until deadline: Date) throws -> Data? {
        guard wait(Int32(POLLIN), until: deadline) else { return Data() }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count > 0 { return Data(buffer[0..<count]) }
            if count == 0 { return nil }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { return Data() }
            if errno == ECONNRESET { return nil }
            throw HTTPFailure("recv: errno \(errno)")
        }
    }
}

/// The bytes of a request: `Connection: close`, and a `Content-Length` whenever there is a body.
private func requestBytes(port: Int, _ method: String, _ path: String, headers: [String: String], body: Data?) -> Data {
    // A `Host` among `headers` replaces the address's own.
    var head = "\(method) \(path) HTTP/1.1\r\nHost: \(headers["Host"] ?? "127.0.0.1:\(port)")\r\nConnection: close\r\n"
    for (name, value) in headers.sorted(by: { $0.key < $1.key }) where name != "Host" { head += "\(name): \(value)\r\n" }
    if body != nil || method == "POST" { head += "Content-Length: \(body?.count ?? 0)\r\n" }
    var data = Data((head + "\r\n").utf8)
    if let body { data.append(body) }
    return data
}

/// One request to `127.0.0.1:port`, with its answer; the whole exchange bounded by `limit` seconds.
func httpRequest(
    port: Int, _ method: String, _ path: String, headers: [String: String] = [:], body: Data? = nil, limit: Double = 30
) async throws -> HTTPAnswer {
    try await onThread {
        Result { () throws -> HTTPAnswer in
            let deadline = Date().addingTimeInterval(limit)
            let socket = try LocalSocket(port: port)
            try socket.send(requestBytes(port: port, method, path, headers: headers, body: body), until: deadline)
            var reader = HTTPResponseReader()
            while true {
                if let status = reader.status, reader.body.complete {
                    return HTTPAnswer(status: status, headers: reader.headers, body: reader.body.data)
                }
                guard Date() < deadline else {
                    throw HTTPFailure(
                        "\(method) \(path): no complete answer within \(Int(limit)) s (got \(reader.raw.count) bytes)")
                }
                guard let data = try socket.receive(until: deadline) else {
                    guard let status = reader.status else {
                        throw HTTPFailure(
                            "\(method) \(path): the connection closed before an answer (\(reader.raw.count) bytes)")
                    }
                    return HTTPAnswer(status: status, headers: reader.headers, body: reader.body.data)
                }
                reader.append(data)
            }
        }
    }.get()
}

/// A response read while it arrives, such as a stream of server-sent events.
final class HTTPStream: @unchecked Sendable {
    // Safe: one test task uses a stream at a time, and awaits each read (which runs on a thread
    // of its own) before the next; nothing else touches `socket` or `reader`.
    private let socket: LocalSocket
    private var reader = HTTPResponseReader()
    /// Whether the server closed the stream.
    private(set) var ended = false

    private init(socket: LocalSocket) {
        self.socket = socket
    }

    /// Sends `GET path` and returns once it is sent (the answer is read by ``read(limit:until:)``).
    static func open(port: Int, _ path: String, headers: [String: String] = [:]) async throws -> HTTPStream {
        try await onThread {
            Result { () throws -> HTTPStream in
                let socket = try LocalSocket(port: port)
                try socket.send(
                    requestBytes(port: port, "GET", path, headers: headers, body: nil),
                    until: Date().addingTimeInterval(10))
                return HTTPStream(socket: socket)
            }
        }.get()
    }

    var status: Int? { reader.status }
    var headers: [String: String] { reader.headers }
    /// The body received so far, as text.
    var text: String { String(decoding: reader.body.data, as: UTF8.self) }

    /// Reads until `condition` holds for the body's text so far, the server closes the stream,
    /// or `limit` seconds pass; returns whether `condition` held.
    func read(limit: Double, until condition: @escaping @Sendable (String) -> Bool) async throws -> Bool {
        try await onThread { [self] in
            Result { () throws -> Bool in
                let deadline = Date().addingTimeInterval(limit)
                while true {
                    if condition(text) { return true }
                    if ended || Date() >= deadline { return false }
                    guard let data = try socket.receive(until: deadline) else {
                        ended = true
                        continue
                    }
                    reader.append(data)
                }
            }
        }.get()
    }
}

/// A port no one listens on now (the kernel's pick for a socket bound to port 0, then closed).
func freeLocalPort() throws -> Int {
    #if canImport(Glibc)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
    #endif
    guard descriptor >= 0 else { throw HTTPFailure("socket: errno \(errno)") }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
            bind(descriptor, address, length) == 0 ? getsockname(descriptor, address, &length) : -1
        }
    }
    guard bound == 0 else { throw HTTPFailure("bind: errno \(errno)") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Waits at most `limit` seconds (on a thread of its own, so that a cancelled task waits too)
/// for `helper` to exit; whether it did.
func waitForExit(_ helper: HelperProcess, limit: Double) async -> Bool {
    await onThread {
        let deadline = Date().addingTimeInterval(limit)
        while helper.process.isRunning, Date() < deadline { usleep(20_000) }
        return !helper.process.isRunning
    }
}

// MARK: - WebDriver

/// The chromedriver installed by Debian's `chromium-driver`.
let chromedriverBinary = URL(fileURLWithPath: "/usr/bin/chromedriver")

/// A chromedriver process on a port of its own, in a process group of its own (with the
/// browsers it starts).
final class ChromeDriver: Sendable {
    let helper: HelperProcess
    let port: Int

    private init(helper: HelperProcess, port: Int) {
        self.helper = helper
        self.port = port
    }

    /// Starts chromedriver and waits (at most 20 s) until `GET /status` says it is ready; tries
    /// another port if the one it was given was taken meanwhile. The browsers' temporary files
    /// (profiles, shared memory) go to `temporaryFolder`.
    static func start(temporaryFolder: String) async throws -> ChromeDriver {
        var failures: [String] = []
        for _ in 0..<3 {
            let port = try freeLocalPort()
            let helper = try HelperProcess(
                ["--port=\(port)"], executable: chromedriverBinary, environment: ["TMPDIR": temporaryFolder])
            let driver = ChromeDriver(helper: helper, port: port)
            let deadline = Date().addingTimeInterval(20)
            while Date() < deadline, helper.process.isRunning, !Task.isCancelled {
                if let answer = try? await httpRequest(port: port, "GET", "/status", limit: 5),
                    let value = answer.object?["value"] as? [String: Any], value["ready"] as? Bool == true
                {
                    return driver
                }
                try? await Task.sleep(for: .milliseconds(100))
            }
            await driver.stop()
            try Task.checkCancellation()
            failures.append("port \(port): \(helper.stdout.suffix(500)) \(helper.stderr.suffix(1000))")
        }
        throw HTTPFailure("chromedriver did not become ready: \(failures.joined(separator: "; "))")
    }

    /// Ends chromedriver and every browser process of its group: SIGTERM, then SIGKILL to the
    /// whole group after at most 5 s; waits for its output to end (bounded).
    func stop() async {
        let pid = helper.process.processIdentifier
        if helper.process.isRunning { helper.kill(SIGTERM) }
        _ = await waitForExit(helper, limit: 5)
        killGroup(pid, SIGKILL)
        _ = await helper.finish(limit: 10, status: nil)
    }
}

/// A browser session driven through the W3C WebDriver HTTP API. Every command is bounded.
struct WebDriverSession: Sendable {
    /// The key under which WebDriver names an element.
    static let elementKey = "element-6066-11e4-a52e-4f735466cecf"

    let driver: ChromeDriver
    let id: String

    /// A new headless Chromium session (`--headless=new --no-sandbox --disable-gpu
    /// --disable-dev-shm-usage --window-size=1400,900`).
    static func create(_ driver: ChromeDriver, arguments extra: [String] = []) async throws -> WebDriverSession {
        let capabilities: [String: Any] = [
            "capabilities": [
                "alwaysMatch": [
                    "browserName": "chrome",
                    "goog:chromeOptions": [
                        "binary": "/usr/bin/chromium",
                        "args": [
                            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                            "--window-size=1400,900",
                        ] + extra,
                    ],
                ]
            ]
        ]
        let value = try await command(driver, "POST", "/session", capabilities, limit: 60)
        guard let id = (value as? [String: Any])?["sessionId"] as? String else {
            throw HTTPFailure("no session id in \(String(describing: value))")
        }
        return WebDriverSession(driver: driver, id: id)
    }

    /// Sends one command; returns its `value`, or throws the WebDriver error it answered.
    private static func command(
        _ driver: ChromeDriver, _ method: String, _ path: String, _ body: [String: Any]?, limit: Double = 30
    ) async throws -> Any? {
        var data: Data?
        if let body { data = try JSONSerialization.data(withJSONObject: body) }
        let answer = try await httpRequest(
            port: driver.port, method, path, headers: ["Content-Type": "application/json; charset=utf-8"], body: data,
            limit: limit)
        let value = answer.object?["value"]
        if answer.status != 200 {
            let error = value as? [String: Any]
            throw WebDriverError(
                status: answer.status, error: error?["error"] as? String ?? "unknown error",
                message: error?["message"] as? String ?? answer.text)
        }
        return value is NSNull ? nil : value
    }

    @discardableResult
    private func command(_ method: String, _ path: String, _ body: [String: Any]? = nil, limit: Double = 30)
        async throws -> Any?
    {
        try await Self.command(driver, method, "/session/\(id)\(path)", body, limit: limit)
    }

    /// Loads `url` (waits for the page's load, at most 60 s).
    func navigate(_ url: String) async throws {
        try await command("POST", "/url", ["url": url], limit: 60)
    }

    /// The elements matching `css`, in document order (or inside `element`).
    func findAll(_ css: String, in element: String? = nil) async throws -> [String] {
        let path = element.map { "/element/\($0)/elements" } ?? "/elements"
        let value = try await command("POST", path, ["using": "css selector", "value": css])
        return ((value as? [[String: Any]]) ?? []).compactMap { $0[Self.elementKey] as? String }
    }

    /// The first element matching `css` (or inside `element`); throws `no such element` when none does.
    func find(_ css: String, in element: String? = nil) async throws -> String {
        let path = element.map { "/element/\($0)/element" } ?? "/element"
        let value = try await command("POST", path, ["using": "css selector", "value": css])
        guard let id = (value as? [String: Any])?[Self.elementKey] as? String else {
            throw HTTPFailure("no element id for \(css)")
        }
        return id
    }

    /// The element's rendered text.
    func text(_ element: String) async throws -> String {
        try await command("GET", "/element/\(element)/text") as? String ?? ""
    }

    /// The element's attribute `name`, or `nil` when it has none.
    func attribute(_ element: String, _ name: String) async throws -> String? {
        try await command("GET", "/element/\(element)/attribute/\(name)") as? String
    }

    func click(_ element: String) async throws {
        try await command("POST", "/element/\(element)/click", [:])
    }

    func sendKeys(_ element: String, _ text: String) async throws {
        try await command("POST", "/element/\(element)/value", ["text": text])
    }

    /// Runs `script` as the body of a function in the page, with `arguments`; returns its value.
    @discardableResult
    func execute(_ script: String, _ arguments: [Any] = []) async throws -> Any? {
        try await command("POST", "/execute/sync", ["script": script, "args": arguments])
    }

    /// The text of the open alert, confirm or prompt; `nil` when none is open.
    func alertText() async throws -> String? {
        do {
            return try await command("GET", "/alert/text") as? String
        } catch let error as WebDriverError where error.error == "no such alert" {
            return nil
        }
    }

    /// The page's visible part, as PNG.
    func screenshot() async throws -> Data {
        guard let text = try await command("GET", "/screenshot", limit: 60) as? String,
            let png = Data(base64Encoded: text)
        else {
            throw HTTPFailure("the screenshot is not base64")
        }
        return png
    }

    /// Ends the session (closes the browser); bounded, and never throws.
    func quit() async {
        _ = try? await Self.command(driver, "DELETE", "/session/\(id)", nil, limit: 20)
    }
}

/// An error a WebDriver command answered.
struct WebDriverError: Error, CustomStringConvertible {
    var status: Int
    var error: String
    var message: String
    var description: String { "WebDriver \(status) \(error): \(message.prefix(800))" }
}

/// Starts chromedriver and a headless Chromium session, runs `body` with it, and ends both:
/// the session is deleted and chromedriver's whole process group killed, also when `body` throws.
/// What the browser leaves in its temporary folder goes with the folder.
func withBrowser<T>(arguments: [String] = [], _ body: (WebDriverSession) async throws -> T) async throws -> T {
    let scratch = try TemporaryFolder()
    defer { withExtendedLifetime(scratch) {} }
    let driver = try await ChromeDriver.start(temporaryFolder: scratch.url.path)
    let session: WebDriverSession
    do {
        session = try await WebDriverSession.create(driver, arguments: arguments)
    } catch {
        await driver.stop()
        throw error
    }
    do {
        let result = try await body(session)
        await session.quit()
        await driver.stop()
        return result
    } catch {
        await session.quit()
        await driver.stop()
        throw error
    }
}
