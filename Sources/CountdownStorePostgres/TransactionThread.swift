import Foundation
import PostgresNIO

/// A transaction's thread: synchronous work on a thread of its own that may block (waiting for
/// each statement's answer), bridged to and from Swift concurrency.
enum TransactionThread {
    /// Runs `body` on a thread of its own and returns its result: a blocked thread here never
    /// holds up a cooperative thread. Each call has a serial queue of its own, which Dispatch
    /// gives a thread even while others wait on the network (a shared concurrent queue runs
    /// about one block per core at a time, so transactions would queue behind blocked ones).
    /// Calls come from leased connections, so no more run at once than a pool has connections.
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue(label: "CountdownStorePostgres.transaction").async {
                continuation.resume(with: Result { try body() })
            }
        }
    }
}

extension TransactionThread {
    /// How long a statement's own failure may follow the closing of its connection.
    static let closingGraceMs = 1000

    /// Waits on this thread for `future`, the result of a statement on `connection`; throws
    /// ``ConnectionLost`` if the connection has closed and the result still has not come a
    /// moment later, ``NoAnswer`` (closing the connection) when no answer came within the
    /// watch's bound, and ``WaitAbandoned`` (closing the connection) once `watch` gives up. (The
    /// connection and the watch are looked at every 0.1 s while the statement runs: a callback
    /// on its closing would stay registered for as long as the connection lives.)
    static func wait<T: Sendable>(
        for future: EventLoopFuture<T>, on connection: PostgresConnection, watch: StatementWatch
    ) throws -> T {
        let done = DispatchSemaphore(value: 0)
        // Set once from an event loop, read from the waiting thread.
        let outcome = Locked<Result<T, any Error>?>(nil)
        future.whenComplete { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        var closedAt: DispatchTime?
        let answerBy = watch.answerBoundMs.map { DispatchTime.now() + .milliseconds($0) }
        while true {
            if done.wait(timeout: .now() + .milliseconds(100)) == .success, let result = outcome.withLock({ $0 }) {
                return try result.get()
            }
            if let reason = watch.reasonToGiveUp() {
                // The session ends (the server rolls its transaction back once it answers again);
                // the pool opens another connection when it needs one.
                let closing: EventLoopFuture<Void> = connection.close()
                closing.whenComplete { _ in }
                throw WaitAbandoned(reason: reason)
            }
            if let answerBy, let bound = watch.answerBoundMs, DispatchTime.now() >= answerBy, !connection.isClosed {
                let closing: EventLoopFuture<Void> = connection.close()
                closing.whenComplete { _ in }
                throw NoAnswer(boundMs: bound)
            }
            guard connection.isClosed else { continue }
            // Closed: the statement's own failure (with the server's reason) normally follows at once.
            let now = DispatchTime.now()
            let since = closedAt ?? now
            closedAt = since
            if now >= since + .milliseconds(closingGraceMs) { throw ConnectionLost() }
        }
    }
}
