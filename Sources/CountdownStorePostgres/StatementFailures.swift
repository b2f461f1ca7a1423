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

/// A statement got no answer within the engine's bound while its connection stayed open: the
/// network path to the server went silent (or the server stalled). The connection is closed,
/// and the store moves on as after a lost connection.
struct NoAnswer: Error, CustomStringConvertible {
    let boundMs: Int
    var description: String { "no answer from the database within \(boundMs) ms; the connection was closed" }
}
