import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The built `orders-service`, beside the test bundle.
let ordersServiceBinary: URL = {
    let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    return [directory, directory.deletingLastPathComponent()]
        .map { $0.appendingPathComponent("orders-service") }
        .first { FileManager.default.isExecutableFile(atPath: $0.path) }
        ?? directory.appendingPathComponent("orders-service")
}()

/// `orders-service` as a real process: its port read from its first line, its stderr kept for
/// reports, every wait bounded, and killed with its process group if a test leaves it running.
final class ServiceProcess: @unchecked Sendable {
    // Safe: `lines` and `errors` are guarded by `lock`; the rest is set once in `init`.
    private let process = Process()
    private let lock = NSLock()
    private var lines: [String] = []
    private var errors = Data()
    private let outputDone = DispatchSemaphore(value: 0)
    private let errorsDone = DispatchSemaphore(value: 0)
    private(set) var port = 0

    init(database: String, paymentWindowMs: Int) throws {
        process.executableURL = ordersServiceBinary
        process.arguments = ["--db", database, "--port", "0", "--payment-window-ms", "\(paymentWindowMs)"]
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"  // a crash ends the process at once
        process.environment = environment
        let output = Pipe()
        let errorOutput = Pipe()
        process.standardOutput = output
        process.standardError = errorOutput
        try process.run()
        // Plain threads with blocking reads, to the end of each pipe.
        let reading = output.fileHandleForReading
        let readingErrors = errorOutput.fileHandleForReading
        Thread.detachNewThread { [self] in
            var pending = Data()
            while case let chunk = reading.availableData, !chunk.isEmpty {
                pending += chunk
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[..<newline], as: UTF8.self)
                    pending = Data(pending[(newline + 1)...])
                    lock.withLock { lines.append(line) }
                }
            }
            outputDone.signal()
        }
        Thread.detachNewThread { [self] in
            let data = readingErrors.readDataToEndOfFile()
            lock.withLock { errors = data }
            errorsDone.signal()
        }
    }

    var pid: Int32 { process.processIdentifier }

    /// What the process wrote on stderr so far (all of it once it has ended).
    var stderr: String { lock.withLock { String(decoding: errors, as: UTF8.self) } }

    /// Waits (at most 60 s) for `listening on http://127.0.0.1:PORT`.
    func waitUntilListening() async throws {
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            let line = lock.withLock { lines.first { $0.hasPrefix("listening on ") } }
            if let line, let port = line.split(separator: ":").last.flatMap({ Int($0) }) {
                self.port = port
                return
            }
            if !process.isRunning {
                _ = errorsDone.wait(timeout: .now() + 5)
                Issue.record("orders-service died before listening (status \(process.terminationStatus)): \(stderr.suffix(2000))")
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        stop(SIGKILL)
        Issue.record("orders-service did not listen within 60 s: \(stderr.suffix(2000))")
        throw CancellationError()
    }

    /// Sends `signal` and waits (at most 30 s) for the process to end; a graceful stop must exit 0.
    func stop(_ signal: Int32) {
        _ = kill(pid, signal)
        if outputDone.wait(timeout: .now() + 30) == .timedOut {
            _ = kill(-pid, SIGKILL)
            _ = outputDone.wait(timeout: .now() + 5)
            Issue.record("orders-service did not stop within 30 s of signal \(signal); killed. stderr: \(stderr.suffix(2000))")
        }
        _ = errorsDone.wait(timeout: .now() + 5)
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        if signal != SIGKILL, process.terminationReason != .exit || process.terminationStatus != 0 {
            Issue.record("orders-service did not exit cleanly on signal \(signal) (status \(process.terminationStatus)): \(stderr.suffix(2000))")
        }
    }

    deinit {
        if process.isRunning { _ = kill(-pid, SIGKILL) }
    }
}

/// The service as a program, as an operator runs it: stopped gracefully, killed with SIGKILL and
/// started again after downtime, on real time. It asserts what happened, never how long it took.
@Suite(
    "Orders service as a process", .timeLimit(.minutes(3)),
    .enabled(if: FileManager.default.isExecutableFile(atPath: ordersServiceBinary.path)))
struct ServiceProcessTests {
    /// The orders of the service, as `GET /orders/{id}` returns them.
    static func orders(_ client: HTTPClient, _ ids: [String]) async throws -> [String: HTTPClient.Reply] {
        var found: [String: HTTPClient.Reply] = [:]
        for id in ids { found[id] = try await client.get("/orders/\(id)") }
        return found
    }

    /// Places `count` orders and pays the first `paying` of them; returns (paid, unpaid) ids.
    static func placeAndPay(_ client: HTTPClient, count: Int, paying: Int) async throws -> (paid: [String], unpaid: [String]) {
        var ids: [String] = []
        for index in 0..<count {
            let reply = try await client.post("/orders", #"{"item": "item \#(index)", "amount_cents": \#(100 + index)}"#)
            #expect(reply.status == 201, "\(reply.json)")
            ids.append(try #require(reply.string("order", "id")))
        }
        for id in ids.prefix(paying) {
            let reply = try await client.post("/orders/\(id)/pay")
            #expect(reply.status == 200, "\(reply.json)")
        }
        return (Array(ids.prefix(paying)), Array(ids.dropFirst(paying)))
    }

    /// Every unpaid order expired at its deadline and every paid one stayed paid, each closed by
    /// its countdown's event (the close commits with the event's acknowledgement: once).
    static func checkClosed(_ client: HTTPClient, paid: [String], unpaid: [String], windowMs: Int) async throws {
        try await eventually("every order is closed by its event", limit: 30) {
            try await orders(client, paid + unpaid).values.allSatisfy { $0.int("order", "closing_event_id") != nil }
        }
        for (id, reply) in try await orders(client, paid + unpaid) {
            if paid.contains(id) {
                #expect(reply.string("order", "status") == "paid", "\(id): \(reply.json)")
                #expect(reply.string("countdown", "state") == "cancelled", "\(id): \(reply.json)")
            } else {
                #expect(reply.string("order", "status") == "expired", "\(id): \(reply.json)")
                // Not early, not extended: closed at its deadline on the store's clock.
                let created = try #require(reply.string("order", "created_at").flatMap(parseInstant))
                let closed = try #require(reply.string("order", "closed_at").flatMap(parseInstant))
                #expect(Int((closed.timeIntervalSince(created) * 1000).rounded()) == windowMs, "\(id): \(reply.json)")
                #expect(reply.string("countdown", "expired_at") == reply.string("order", "closed_at"))
            }
        }
    }

    static func parseInstant(_ text: String) -> Date? {
        try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    @Test("Every order is closed exactly once across a graceful stop, downtime, a SIGKILL and restarts")
    func restartsAndKills() async throws {
        let folder = try TemporaryFolder()
        let database = folder.path("orders.sqlite")

        // 12 orders with 2-second payment deadlines, 4 paid; a graceful stop before any deadline.
        let first = try ServiceProcess(database: database, paymentWindowMs: 2000)
        try await first.waitUntilListening()
        let firstOrders = try await Self.placeAndPay(HTTPClient(port: first.port), count: 12, paying: 4)
        first.stop(SIGTERM)
        let log = (try? FileManager.default.attributesOfItem(atPath: database + "-wal")[.size] as? NSNumber)?.intValue ?? 0
        #expect(log == 0, "a graceful stop folds the write-ahead log back into the file (\(log) bytes left)")

        // 3 s of downtime: every unpaid deadline passes while nothing runs.
        try await Task.sleep(for: .seconds(3))
        let second = try ServiceProcess(database: database, paymentWindowMs: 1500)
        try await second.waitUntilListening()
        let client = HTTPClient(port: second.port)
        try await Self.checkClosed(client, paid: firstOrders.paid, unpaid: firstOrders.unpaid, windowMs: 2000)
        let tooLate = try await client.post("/orders/\(firstOrders.unpaid[0])/pay")
        #expect(tooLate.status == 409)
        #expect(tooLate.string("error", "code") == "wrongState")

        // 10 more with 1.5-second deadlines, 3 paid, then SIGKILL with the deadlines pending.
        let secondOrders = try await Self.placeAndPay(client, count: 10, paying: 3)
        second.stop(SIGKILL)
        try await Task.sleep(for: .seconds(2))
        let third = try ServiceProcess(database: database, paymentWindowMs: 1500)
        try await third.waitUntilListening()
        let thirdClient = HTTPClient(port: third.port)
        // A kill between closing an order and acknowledging its event cannot come: both commit
        // in one transaction, or neither does (and the event comes again).
        try await Self.checkClosed(thirdClient, paid: secondOrders.paid, unpaid: secondOrders.unpaid, windowMs: 1500)
        try await Self.checkClosed(thirdClient, paid: firstOrders.paid, unpaid: firstOrders.unpaid, windowMs: 2000)
        third.stop(SIGTERM)

        // Everything handled was acknowledged: a fourth start delivers nothing again.
        let fourth = try ServiceProcess(database: database, paymentWindowMs: 1500)
        try await fourth.waitUntilListening()
        let fourthClient = HTTPClient(port: fourth.port)
        let probe = try await Self.placeAndPay(fourthClient, count: 1, paying: 1)  // its event comes after all the others
        try await Self.checkClosed(fourthClient, paid: probe.paid, unpaid: [], windowMs: 1500)
        try await Self.checkClosed(fourthClient, paid: secondOrders.paid, unpaid: secondOrders.unpaid, windowMs: 1500)
        try await Self.checkClosed(fourthClient, paid: firstOrders.paid, unpaid: firstOrders.unpaid, windowMs: 2000)
        fourth.stop(SIGTERM)
    }
}
