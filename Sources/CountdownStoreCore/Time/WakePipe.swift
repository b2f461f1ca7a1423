import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A pipe that wakes a thread of the store's own (the boot sleeper, an engine's log checkpointer) from a
/// `poll` with a relative timeout: relative timeouts do not depend on the wall clock at all.
package final class WakePipe: Sendable {
    private let readEnd: Int32
    private let writeEnd: Int32

    package init() {
        var fds: [Int32] = [-1, -1]
        _ = pipe(&fds)
        (readEnd, writeEnd) = (fds[0], fds[1])
        _ = fcntl(readEnd, F_SETFL, fcntl(readEnd, F_GETFL) | O_NONBLOCK)
        _ = fcntl(writeEnd, F_SETFL, fcntl(writeEnd, F_GETFL) | O_NONBLOCK)
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }

    /// Wakes the thread waiting in ``wait(timeoutMs:)``, or makes its next wait return at once.
    package func poke() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    /// Waits until poked or `timeoutMs` have passed (`-1`: no timeout); returns whether it was poked.
    @discardableResult
    package func wait(timeoutMs: Int32) -> Bool {
        var descriptor = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, timeoutMs) > 0 else { return false }
        var buffer = [UInt8](repeating: 0, count: 64)
        _ = read(readEnd, &buffer, buffer.count)
        return true
    }
}
