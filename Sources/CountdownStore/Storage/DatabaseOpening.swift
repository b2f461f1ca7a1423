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
    ///
    /// WAL is set here rather than with GRDB's `journalMode = .wal`, which, whenever the `-wal`
    /// file is missing or empty (as after every clean close), creates and drops a table to make
    /// one: a schema write at every open, even into a file the store should only read.
    static func grdbConfiguration(busyTimeout: Duration) -> GRDB.Configuration {
        var configuration = GRDB.Configuration()
        configuration.busyMode = .timeout(TimeInterval(busyTimeout.milliseconds) / 1000)
        configuration.label = "CountdownStore"
        configuration.prepareDatabase { db in
            if try String.fetchOne(db, sql: "PRAGMA journal_mode") != "wal" {
                try db.execute(sql: "PRAGMA journal_mode = WAL")
            }
            try db.execute(sql: "PRAGMA trusted_schema = OFF")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // After a checkpoint empties a WAL that grew in a burst, give the disk space back.
            try db.execute(sql: "PRAGMA journal_size_limit = 67108864")
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
    /// a file that is not SQLite, is truncated, holds someone else's tables, or was written by a
    /// newer CountdownStore: all of that is checked on a read-only connection first, because a
    /// read-write connection would already rewrite the header when it switches the file to WAL.
    ///
    /// One serialized connection (a `DatabaseQueue`): operations are short, ticks are computed in
    /// memory, and other processes still read and write beside it through WAL.
    static func open(path: String, busyTimeout: Duration) throws(CountdownError) -> DatabaseQueue {
        try createIfMissing(path)
        try probe(path: path)
        return try translatingErrorsNow(path: path) {
            try DatabaseQueue(path: path, configuration: grdbConfiguration(busyTimeout: busyTimeout))
        }
    }

    /// Checks, without writing a byte, that the file at `path` is empty or a CountdownStore
    /// database this code can open.
    static func probe(path: String) throws(CountdownError) {
        let place = quoted(path, limit: 200)
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw CountdownError(.storageFailure, "cannot read the database file \(place)")
        }
        let header = (try? handle.read(upToCount: 100)) ?? Data()
        let size = (try? handle.seekToEnd()).map(Int.init) ?? 0
        try? handle.close()
        if size == 0 { return }  // a new, empty database
        let magic = Data("SQLite format 3\u{0}".utf8)
        guard header.count == 100, header.prefix(16) == magic else {
            throw CountdownError(
                .unreadableDatabase, "the file at \(place) is not an SQLite database; it was left untouched")
        }
        func uint32(_ offset: Int) -> Int {
            header[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
        }
        let rawPageSize = Int(header[16]) << 8 | Int(header[17])
        let pageSize = rawPageSize == 1 ? 65_536 : rawPageSize
        let pages = uint32(28)
        // The page count in the header is valid when "version-valid-for" matches the change counter.
        if uint32(92) == uint32(24), pages > 0, pages * pageSize > size {
            throw CountdownError(
                .unreadableDatabase,
                "the database file at \(place) is truncated: \(size) bytes where its header says \(pages * pageSize); it was left untouched"
            )
        }
        try translatingErrorsNow(path: path) {
            var configuration = GRDB.Configuration()
            configuration.readonly = true
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? queue.close() }
            try queue.read { db in
                let tables = try String.fetchAll(
                    db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
                if !tables.isEmpty, !tables.contains(Migrator.tableName) {
                    throw CountdownError(
                        .foreignDatabase,
                        "the file at \(place) is an SQLite database of something else (tables \(tables.prefix(5).map { quoted($0) }.joined(separator: ", "))); it was left untouched"
                    )
                }
                try Migrator().checkNotNewer(db)
            }
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
