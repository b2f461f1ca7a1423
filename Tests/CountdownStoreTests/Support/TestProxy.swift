import Foundation

/// A TCP proxy on 127.0.0.1 in front of one server, that can cut the path silently: it stops
/// forwarding (one way or both) without closing anything, as a network partition does, so that
/// neither side hears of it. Connections opened while it is cut hang the same way.
final class SilentProxy: @unchecked Sendable {
    // Safe: `mode`, `sockets` and `closed` are only touched under `lock`; the threads own their
    // descriptors, which `close()` shuts down (never closes) so that no number is reused under them.

    /// What the proxy forwards.
    enum Mode: Sendable, Equatable {
        /// Everything, both ways.
        case forwarding
        /// Nothing: both directions stand still, nothing is closed.
        case silent
        /// What the client sends stands still; the server's answers still come.
        case clientToServerCut
    }

    /// The port it listens on, on 127.0.0.1.
    let port: Int
    private var target: (host: String, port: Int)
    private let lock = NSLock()
    private var mode = Mode.forwarding
    private var sockets: [Int32] = []
    private var closed = false
    private let listener: Int32

    /// A proxy to `host`:`port`, listening on a free port of 127.0.0.1.
    init(toHost host: String = "127.0.0.1", port targetPort: Int) throws {
        target = (host, targetPort)
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        guard listener >= 0 else { throw HarnessError("proxy: socket: errno \(errno)") }
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.address("127.0.0.1", 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        guard bound, listen(listener, 128) == 0 else { throw HarnessError("proxy: bind/listen: errno \(errno)") }
        port = Int(UInt16(bigEndian: address.sin_port))
        sockets.append(listener)
        let proxy = self
        Thread.detachNewThread { proxy.acceptLoop() }
    }

    /// Sets what it forwards from now on.
    func set(_ mode: Mode) {
        lock.withLock { self.mode = mode }
    }

    /// Sends new connections to `port` from now on, and ends those open: as when a virtual IP
    /// or a DNS name moves to another server (the old server's connections break).
    func retarget(port: Int) {
        let open = lock.withLock { () -> [Int32] in
            target = (target.host, port)
            return sockets.filter { $0 != listener }
        }
        for fd in open { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    /// Stops it: every connection through it ends.
    func close() {
        let all = lock.withLock { () -> [Int32] in
            closed = true
            return sockets
        }
        for fd in all { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private var isClosed: Bool { lock.withLock { closed } }

    private func currentMode() -> Mode { lock.withLock { mode } }

    private static func address(_ host: String, _ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr(host)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return address
    }

    private func acceptLoop() {
        while !isClosed {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                return
            }
            let registered = lock.withLock { () -> Bool in
                guard !closed else { return false }
                sockets.append(client)
                return true
            }
            guard registered else {
                Glibc.close(client)
                return
            }
            let proxy = self
            Thread.detachNewThread { proxy.serve(client) }
        }
    }

    /// Connects `client` to the target once the path is open, then pumps both ways.
    private func serve(_ client: Int32) {
        // A connection made while the path is cut hangs until it is open again.
        while currentMode() == .silent, !isClosed { usleep(20_000) }
        let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        let target = lock.withLock { self.target }
        var address = Self.address(target.host, target.port)
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected, lock.withLock({ () -> Bool in
            guard !closed else { return false }
            sockets.append(server)
            return true
        }) else {
            Glibc.close(server)
            shutdown(client, Int32(SHUT_RDWR))
            return
        }
        let proxy = self
        let done = DispatchGroup()
        done.enter()
        Thread.detachNewThread {
            proxy.pump(from: client, to: server, clientToServer: true)
            done.leave()
        }
        pump(from: server, to: client, clientToServer: false)
        done.wait()
        lock.withLock { sockets.removeAll { $0 == client || $0 == server } }
        Glibc.close(client)
        Glibc.close(server)
    }

    /// Copies what `source` sends to `destination` while this direction is open; stands still
    /// (reading nothing) while it is cut. Ends at either side's end.
    private func pump(from source: Int32, to destination: Int32, clientToServer: Bool) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while !isClosed {
            let mode = currentMode()
            if mode == .silent || (mode == .clientToServerCut && clientToServer) {
                usleep(20_000)
                continue
            }
            var poller = pollfd(fd: source, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, 50)
            if ready == 0 { continue }
            if ready < 0 {
                if errno == EINTR { continue }
                break
            }
            // Looked at again: the path may have been cut while waiting.
            let now = currentMode()
            if now == .silent || (now == .clientToServerCut && clientToServer) { continue }
            let count = read(source, &buffer, buffer.count)
            if count <= 0 { break }
            var sent = 0
            while sent < count {
                let written = buffer[sent..<count].withUnsafeBytes { write(destination, $0.baseAddress, count - sent) }
                if written <= 0 {
                    if errno == EINTR { continue }
                    shutdown(source, Int32(SHUT_RDWR))
                    return
                }
                sent += written
            }
        }
        shutdown(destination, Int32(SHUT_WR))
        shutdown(source, Int32(SHUT_RD))
    }
}
