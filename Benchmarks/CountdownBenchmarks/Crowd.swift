import CountdownStore
import Foundation

/// `countdown serve` in front of a crowd: event streams that never read and clients that never
/// finish a request, beside countdowns coming due. Each run starts a server of the same build on
/// its own store and measures how late its ticker records the expiries (the `late_ms` of each),
/// how long `/healthz` takes meanwhile, and the server's peak memory: once alone, once with the
/// crowd. No raw engine does this work, so the figures are shown, not judged.
extension Benchmarks {
    func serveCrowd(tool: String) async throws -> [Figure] {
        var figures: [Figure] = []
        for crowded in [false, true] {
            let run = try await serveRun(tool: tool, crowded: crowded)
            let label = crowded ? "with \(sizes.crowdStreams) idle streams and \(sizes.crowdSlow) slow clients" : "alone"
            log(String(format: "  serve %@: expiries late p50 %.0f ms, p99 %.0f ms, max %.0f ms; /healthz p99 %.1f ms, max %.1f ms; peak memory %.0f MiB",
                       label, run.lateP50, run.lateP99, run.lateMax, run.healthP99, run.healthMax, run.peakMiB))
            let name = "serve " + (crowded ? "crowd" : "alone")
            figures += [
                Figure(name: "\(name): expiry late p99", n: sizes.crowdDue, ours: run.lateP99, raw: nil, unit: "ms", target: .unjudged),
                Figure(name: "\(name): /healthz p99", n: run.healthSamples, ours: run.healthP99, raw: nil, unit: "ms", target: .unjudged),
                Figure(name: "\(name): peak memory", n: 1, ours: run.peakMiB, raw: nil, unit: "MiB", target: .unjudged),
            ]
        }
        return figures
    }

    struct ServeRun {
        var lateP50: Double, lateP99: Double, lateMax: Double
        var healthP99: Double, healthMax: Double, healthSamples: Int
        var peakMiB: Double
    }

    private func serveRun(tool: String, crowded: Bool) async throws -> ServeRun {
        let file = try await emptyStore("crowd-\(crowded ? "on" : "off").sqlite")
        let leadMs: Int64 = 6_000
        let spacingMs = max(1, 5_000 / sizes.crowdDue)
        let store = try CountdownStore(path: file)
        try await store.start((0..<sizes.crowdDue).map { index in
            CountdownRequest.countdown("due-\(index)", duration: .milliseconds(leadMs + Int64(index * spacingMs)), group: "due")
        })
        try await store.close()

        let output = path("crowd-serve.log")
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let server = Process()
        server.executableURL = URL(fileURLWithPath: tool)
        server.arguments = ["--db", file, "serve", "--port", "0", "--max-streams", "256"]
        server.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer {
            if server.isRunning { kill(server.processIdentifier, SIGKILL) }
            server.waitUntilExit()
        }
        var port = 0
        let started = ContinuousClock.now
        while port == 0 {
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            if let match = text.firstMatch(of: #/http://127\.0\.0\.1:(\d+)//#) { port = Int(match.1) ?? 0 }
            guard server.isRunning, ContinuousClock.now - started < .seconds(30) else {
                throw BenchmarkError("countdown serve did not print its address within 30 s")
            }
            try await Task.sleep(for: .milliseconds(20))
        }

        var crowd: [CrowdSocket] = []
        if crowded {
            for _ in 0..<sizes.crowdStreams {
                let socket = try CrowdSocket(port: port)
                socket.send("GET /api/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                crowd.append(socket)
            }
            for _ in 0..<sizes.crowdSlow {
                let socket = try CrowdSocket(port: port)
                socket.send("GET /healthz HTTP/1.1\r\nHost: 127")
                crowd.append(socket)
            }
        }

        // `/healthz` every 50 ms until every countdown expired (or 60 s after the last deadline).
        var health: [Double] = []
        let deadline = ContinuousClock.now + .milliseconds(leadMs + Int64(sizes.crowdDue * spacingMs)) + .seconds(60)
        let raw = try RawDatabase(path: file)
        let count = try raw.prepare("SELECT count(*) FROM countdown_events WHERE kind = 'expired'")
        while ContinuousClock.now < deadline {
            let before = ContinuousClock.now
            guard try CrowdSocket.get(port: port, "/healthz") == 200 else { throw BenchmarkError("/healthz did not answer 200") }
            health.append((ContinuousClock.now - before).seconds * 1e3)
            _ = try count.bind([]).step()
            if count.int(0) >= sizes.crowdDue { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        let peakKiB = (try? String(contentsOfFile: "/proc/\(server.processIdentifier)/status", encoding: .utf8))?
            .split(separator: "\n").first { $0.hasPrefix("VmHWM:") }
            .flatMap { Double($0.split(separator: " ").dropFirst().first ?? "") } ?? .nan
        withExtendedLifetime(crowd) {}
        crowd.removeAll()
        kill(server.processIdentifier, SIGTERM)

        let lates = try raw.prepare("SELECT late_ms FROM countdown_events WHERE kind = 'expired'")
        var late: [Double] = []
        while try lates.step() { late.append(Double(lates.int(0))) }
        guard late.count >= sizes.crowdDue else {
            throw BenchmarkError("only \(late.count) of \(sizes.crowdDue) countdowns expired within 60 s of the last deadline")
        }
        late.sort()
        health.sort()
        return ServeRun(
            lateP50: percentile(late, 0.5), lateP99: percentile(late, 0.99), lateMax: late.last ?? .nan,
            healthP99: percentile(health, 0.99), healthMax: health.last ?? .nan, healthSamples: health.count,
            peakMiB: peakKiB / 1024)
    }
}

/// A client socket to 127.0.0.1 that sends and never reads, closed when released.
final class CrowdSocket {
    let descriptor: Int32

    init(port: Int) throws {
        #if canImport(Glibc)
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw BenchmarkError("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port)).bigEndian
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            throw BenchmarkError("cannot connect to 127.0.0.1:\(port): errno \(errno)")
        }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(descriptor) }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        #if canImport(Glibc)
        _ = Glibc.send(descriptor, bytes, bytes.count, Int32(MSG_NOSIGNAL))
        #else
        _ = Darwin.send(descriptor, bytes, bytes.count, 0)
        #endif
    }

    /// One `GET` on a connection of its own; the status of its answer (reads at most 10 s).
    static func get(port: Int, _ path: String) throws -> Int {
        let socket = try CrowdSocket(port: port)
        socket.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        var buffer = [UInt8](repeating: 0, count: 4096)
        var received: [UInt8] = []
        while received.count < 12 {
            let count = recv(socket.descriptor, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            received += buffer[0..<count]
        }
        let head = String(decoding: received.prefix(12), as: UTF8.self)
        return Int(head.dropFirst(9).prefix(3)) ?? 0
    }
}
