import Foundation

/// A database engine's failure that knows which ``CountdownError`` it is (by its result code, or
/// its server's error code): each engine makes its own error type conform.
package protocol StorageFailure: Error {
    /// The failure as a ``CountdownError`` whose message names `place` (" at 'PATH'", or empty).
    func countdownError(place: String) -> CountdownError

    /// Whether the failure is the connection's, not the data's: the connection was lost or
    /// refused (a server restarting or shutting down, a terminated session), so the same call
    /// may succeed once the engine has connected again. A running ticker retries these.
    var isTransient: Bool { get }
}

extension StorageFailure {
    /// No failure is transient unless the engine says so (an embedded engine's never are).
    package var isTransient: Bool { false }
}

/// Turns storage failures into ``CountdownError``s; lets ``CountdownError``s through.
package func translatingErrors<T>(path: String? = nil, _ body: () async throws -> T) async throws(CountdownError) -> T {
    do {
        return try await body()
    } catch {
        throw CountdownError(storage: error, path: path)
    }
}

/// Synchronous twin of ``translatingErrors(path:_:)``.
package func translatingErrorsNow<T>(path: String? = nil, _ body: () throws -> T) throws(CountdownError) -> T {
    do {
        return try body()
    } catch {
        throw CountdownError(storage: error, path: path)
    }
}

extension CountdownError {
    /// Whether this is a storage failure of the connection to the database rather than of the
    /// data (see ``StorageFailure/isTransient``): the same call may succeed when tried again.
    package var isTransient: Bool {
        (underlyingError as? any StorageFailure)?.isTransient ?? false
    }

    /// A storage failure described for people, with a code to switch on, the database's place,
    /// and the failure itself as ``CountdownError/underlyingError``.
    package init(storage error: any Error, path: String?) {
        if let error = error as? CountdownError {
            self = error
            return
        }
        let place = path.map { " at \(quoted($0, limit: 200))" } ?? ""
        if let failure = error as? any StorageFailure {
            self = failure.countdownError(place: place)
        } else {
            self.init(.storageFailure, "storage failure\(place): \(error)", underlying: error)
        }
    }
}
