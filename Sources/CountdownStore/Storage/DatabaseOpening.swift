import CSQLiteShim
import Foundation
import GRDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Opening a database file with the connection settings of SPEC section 4.
enum DatabaseOpening {
    /// GRDB settings for every connection: WAL, a busy timeout, `trusted_schema=OFF`, defensive mode.
    static func grdbConfiguration(busyTimeout: Duration) -> GRDB.Configuration {
        var configuration = GRDB.Configuration()
        configuration.journalMode = .wal
        configuration.busyMode = .timeout(TimeInterval(busyTimeout.milliseconds) / 1000)
        configuration.label = "CountdownStore"
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA trusted_schema = OFF")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            if let connection = db.sqliteConnection {
                let code = countdown_enable_defensive(connection)
                if code != SQLITE_OK {
                    throw DatabaseError(resultCode: ResultCode(rawValue: code), message: "cannot enable defensive mode")
                }
            }
        }
        return configuration
    }

    /// Opens the file at `path`, creating it with mode 0600 when missing. Refuses, untouched,
    /// a file that is not SQLite or an SQLite database that holds someone else's tables.
    static func open(path: String, busyTimeout: Duration) throws(CountdownError) -> DatabasePool {
        try createIfMissing(path)
        return try translatingErrorsNow(path: path) {
            let pool = try DatabasePool(path: path, configuration: grdbConfiguration(busyTimeout: busyTimeout))
            try pool.read { db in
                let tables = try String.fetchAll(
                    db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
                if !tables.isEmpty, !tables.contains(Migrator.tableName) {
                    throw CountdownError(
                        .foreignDatabase,
                        "the file at \(quoted(path, limit: 200)) is an SQLite database of something else (tables \(tables.prefix(5).map { quoted($0) }.joined(separator: ", "))); it was left untouched"
                    )
                }
            }
            return pool
        }
    }

    /// Creates an empty file readable and writable by its owner alone; SQLite gives its
    /// `-wal` and `-shm` files the same mode.
    private static func createIfMissing(_ path: String) throws(CountdownError) {
        let fd = openExclusive(path)
        if fd >= 0 {
            close(fd)
            return
        }
        let error = errno
        if error == EEXIST { return }
        throw CountdownError(
            .storageFailure,
            "cannot create the database file \(quoted(path, limit: 200)): \(String(cString: strerror(error)))")
    }
}

/// `open(path, O_WRONLY | O_CREAT | O_EXCL, 0600)`.
private func openExclusive(_ path: String) -> Int32 {
    #if canImport(Glibc)
    Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
    #elseif canImport(Musl)
    Musl.open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
    #else
    Darwin.open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
    #endif
}
