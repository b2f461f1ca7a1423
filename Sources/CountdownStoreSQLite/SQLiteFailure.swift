import CountdownStoreCore
import CountdownStoreSQL
import CSQLiteShim
import Foundation
import GRDB

extension DatabaseError: StorageFailure {
    /// SQLite's failure as a ``CountdownError``: its result code decides the error's code.
    package func countdownError(place: String) -> CountdownError {
        let detail = message ?? "\(resultCode)"
        switch resultCode {
        case .SQLITE_NOTADB, .SQLITE_CORRUPT:
            return CountdownError(
                .unreadableDatabase,
                "the file\(place) is not a readable SQLite database (\(detail)); it was left untouched",
                underlying: self)
        case .SQLITE_FULL:
            return CountdownError(.diskFull, "disk full writing the database\(place): \(detail)", underlying: self)
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            return CountdownError(
                .databaseBusy, "the database\(place) stayed locked by another process: \(detail)", underlying: self)
        case .SQLITE_IOERR, .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_READONLY:
            return CountdownError(
                .ioFailure, "could not read or write the database\(place): \(detail) (\(resultCode))", underlying: self)
        default:
            return CountdownError(
                .storageFailure, "storage failure\(place): \(detail) (\(resultCode))", underlying: self)
        }
    }
}
