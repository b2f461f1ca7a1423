import CountdownStoreCore
import Foundation
import PostgresNIO

/// A failure of PostgreSQL or of the connection to it, as the store reports it.
struct PostgresFailure: Error, StorageFailure, @unchecked Sendable {
    let error: any Error
    let place: String

    /// `error` as it came, or what it wraps: a failure of this kind, or a ``CountdownError`` the
    /// store made of one (a host's transaction hands its failures back as the store reports
    /// them), so that what the server said (a standby refusing writes) is seen wherever it passed.
    init(_ error: any Error, place: String) {
        var inner = error
        while true {
            if let failure = inner as? PostgresFailure {
                inner = failure.error
            } else if let reported = inner as? CountdownError, let underlying = reported.underlyingError {
                inner = underlying
            } else {
                break
            }
        }
        self.error = inner
        self.place = place
    }

    /// The SQLSTATE the server sent, if it sent one.
    var sqlState: String? {
        (error as? PSQLError)?.serverInfo?[.sqlState]
    }

    /// The server's error code, by postgres-nio's name, if the server sent one.
    var code: PostgresError.Code? {
        sqlState.map(PostgresError.Code.init(raw:))
    }

    /// Whether the server rolled the transaction back to break a deadlock (or a serialization failure).
    var isDeadlock: Bool {
        code == .deadlockDetected || code == .serializationFailure
    }

    /// Whether the connection failed rather than the statement: the server closed it or is
    /// shutting down or starting up (postgres-nio's `PostgresError.Code.connectionEnded`, class 08 connection
    /// exceptions), the connection broke or was closing, or the pool could not open one. The
    /// store's own pool being shut down (the store closed) is not transient.
    var isTransient: Bool {
        if error is ConnectionLost || error is WaitAbandoned || error is NoAnswer { return true }
        if let none = error as? ServerSelection.NoServer { return !none.isFinal }
        guard let psql = error as? PSQLError else {
            // The pool's own failure that postgres-nio does not turn into a `PSQLError`: no
            // connection could be opened for a while (its circuit breaker tripped). Its type
            // lives in a module of postgres-nio's own, so it is told by its name.
            return String(describing: type(of: error)) == "ConnectionPoolError"
        }
        switch psql.code {
        case .serverClosedConnection, .clientClosedConnection, .connectionError, .uncleanShutdown:
            // (A query sent on a connection already closing after the server's error is
            // reported as closed by the client.)
            return true
        case .server:
            guard let code else { return false }
            // A server that refuses writes as read-only may be promoted, or the store moves on
            // to one that takes them (see ``ServerSelection``).
            return PostgresError.Code.connectionEnded.contains(code) || code.raw.hasPrefix("08")
                || code == .readOnlySqlTransaction
        default:
            return false
        }
    }

    func countdownError(place _: String) -> CountdownError {
        let where_ = " at \(place)"
        if let abandoned = error as? WaitAbandoned {
            return CountdownError(
                .ioFailure, "stopped waiting for the database\(where_): \(abandoned.reason)", underlying: self)
        }
        if let none = error as? ServerSelection.NoServer {
            return CountdownError(.ioFailure, "could not connect to the database\(where_): \(none)", underlying: self)
        }
        if let silent = error as? NoAnswer {
            return CountdownError(
                .ioFailure, "lost the connection to the database\(where_): \(silent)", underlying: self)
        }
        if code == .readOnlySqlTransaction {
            let message = (error as? PSQLError)?.serverInfo?[.message] ?? "read-only"
            return CountdownError(
                .ioFailure,
                "the database server\(where_) refuses writes (a standby, or a primary being demoted): "
                    + "\(message) (SQLSTATE 25006)",
                underlying: self)
        }
        if isTransient, error is ConnectionLost || error is PSQLError {
            let psql = error as? PSQLError
            let reason =
                psql?.serverInfo?[.message].map { "\($0) (SQLSTATE \(sqlState ?? ""))" } ?? psql.map { "\($0.code)" }
                ?? "\(error)"
            return CountdownError(
                .ioFailure, "lost the connection to the database\(where_): \(reason)", underlying: self)
        }
        guard let psql = error as? PSQLError else {
            // The pool's own failures: no connection could be made.
            return CountdownError(.ioFailure, "could not reach the database\(where_): \(error)", underlying: self)
        }
        let message = psql.serverInfo?[.message] ?? "\(psql.code)"
        guard let code else {
            return CountdownError(.ioFailure, "could not reach the database\(where_): \(message)", underlying: self)
        }
        if code == .diskFull {
            return CountdownError(.diskFull, "disk full writing the database\(where_): \(message)", underlying: self)
        }
        if PostgresError.Code.busy.contains(code) {
            return CountdownError(
                .databaseBusy, "the database\(where_) stayed locked by another connection: \(message)", underlying: self
            )
        }
        return CountdownError(
            .storageFailure, "storage failure\(where_): \(message) (SQLSTATE \(code.raw))", underlying: self)
    }
}

extension PostgresError.Code {
    /// `idle_session_timeout` (PostgreSQL 14 and later), which postgres-nio does not name.
    static let idleSessionTimeout = PostgresError.Code(raw: "57P05")

    /// The server ended the session, not the statement: it is shutting down or starting up, or
    /// a session timeout fired (an idle-in-transaction timeout can fire early on a server whose
    /// clock jumps). A new connection may succeed.
    static let connectionEnded: [PostgresError.Code] = [
        .adminShutdown, .crashShutdown, .cannotConnectNow, .idleSessionTimeout, .idleInTransactionSessionTimeout,
    ]

    /// Another connection held what this one needed for too long: a lock wait ran out, the
    /// statement timed out, or the server rolled back to break a deadlock.
    static let busy: [PostgresError.Code] = [
        .lockNotAvailable, .serializationFailure, .deadlockDetected, .queryCanceled,
    ]
}
