import Foundation

// Why a statement or a transaction on PostgreSQL got no result of its own.

/// A transaction's BEGIN failed: nothing of it ran.
struct BeginFailed: Error {
    let failure: PostgresFailure
}

/// The connection closed and a statement sent on it got no result: postgres-nio drops a
/// statement written to a connection that has just closed (a server restart, a terminated
/// session) without failing it.
struct ConnectionLost: Error, CustomStringConvertible {
    var description: String { "the connection closed before the statement's result came" }
}

/// A statement was no longer waited for: the store closed without waiting for it, or the task
/// that waited was cancelled and the database did not answer within the stop's bound.
struct WaitAbandoned: Error, CustomStringConvertible {
    let reason: String
    var description: String { "stopped waiting for the database's answer: \(reason)" }
}
