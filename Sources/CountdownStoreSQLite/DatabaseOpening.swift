import CountdownStoreCore
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
    /// The label of the connections the store opens itself.
    static let connectionLabel = "CountdownStore"

    /// After how many pages of WAL a commit checkpoints by itself (`wal_autocheckpoint`), while
    /// no ticker's checkpointer does it.
    ///
    /// With `.normal`, only once the WAL holds 1 GiB: a running ticker's checkpointer folds it in
    /// long before (in a thread of its own, between the batches of a backlog too); a commit that
    /// checkpoints waits for a disk sync, which would hold up a writer of another process in the
    /// middle of a backlog. With `.full`, every commit syncs the WAL already, and a WAL that grows
    /// at every commit makes each of those syncs also write the file system's record of its new
    /// size, which doubles what a commit costs; SQLite's own 1,000 pages keep the WAL written over
    /// from its start instead.
    static func automaticCheckpointPages(_ durability: CountdownStore.Durability) -> Int {
        durability == .full ? 1000 : 262_144
    }

    /// GRDB settings for every connection: WAL, a busy timeout, `trusted_schema=OFF`, defensive mode.
    ///
    /// WAL is set here rather than with GRDB's `journalMode = .wal`, which, whenever the `-wal`
    /// file is missing or empty (as after every clean close), creates and drops a table to make
    /// one: a schema write at every open, even into a file the store should only read.
    static func grdbConfiguration(busyTimeout: Duration, durability: CountdownStore.Durability) -> GRDB.Configuration {
        var configuration = GRDB.Configuration()
        configuration.busyMode = busyMode(busyTimeout)
        configuration.label = connectionLabel
        configuration.prepareDatabase { db in
            try switchToWAL(db, busyTimeout: busyTimeout)
            try db.execute(sql: "PRAGMA trusted_schema = OFF")
            try db.execute(sql: durability == .full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
            // A commit never cuts the WAL file: the commit that starts a WAL grown to hundreds
            // of MiB over would cut it in one `ftruncate` and hold every other writer back while
            // the kernel lets go of its pages. A running ticker's checkpointer trims it instead,
            // in short steps (see WALCheckpointer); otherwise the last connection to close
            // removes it.
            try db.execute(sql: "PRAGMA journal_size_limit = -1")
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(automaticCheckpointPages(durability))")
            if let connection = db.sqliteConnection {
                let code = countdown_enable_defensive(connection)
                if code != SQLITE_OK {
                    throw DatabaseError(resultCode: ResultCode(rawValue: code), message: "cannot enable defensive mode")
                }
            }
        }
        return configuration
    }

    /// GRDB's busy mode for waiting up to `busyTimeout` for another connection's lock.
    ///
    /// The wait polls every millisecond, where SQLite's own busy timeout backs off up to 100 ms
    /// between tries: a ticker recording a backlog pauses briefly between its transactions,
    /// and a writer of another process that polls this often takes the lock in that pause
    /// instead of waiting for the whole backlog.
    static func busyMode(_ busyTimeout: Duration) -> Database.BusyMode {
        let timeoutMs = max(0, busyTimeout.milliseconds)
        let started = Locked<ContinuousClock.Instant?>(nil)
        return .callback { tries in
            if BusyWait.failsFast { return false }
            let now = ContinuousClock.now
            let since = started.withLock { first -> Duration in
                if tries == 0 || first == nil { first = now }
                return now - (first ?? now)
            }
            guard since.milliseconds < timeoutMs else { return false }
            usleep(1000)
            return true
        }
    }

    /// Puts the file in WAL mode unless it is already, waiting up to `busyTimeout` for other
    /// connections.
    ///
    /// SQLite's busy handler does not help here: the switch reads the header, then needs the
    /// write lock, and a connection holding a read lock that waited for the write lock could
    /// deadlock, so SQLite answers "database is locked" at once while another connection writes
    /// the file in rollback mode — as when several processes create the same new store together.
    /// The switch is retried instead, each time from a fresh read.
    static func switchToWAL(_ db: Database, busyTimeout: Duration) throws {
        let deadline = ContinuousClock.now + busyTimeout
        var pause = Duration.milliseconds(1)
        while try String.fetchOne(db, sql: "PRAGMA journal_mode") != "wal" {
            do {
                let mode = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
                if mode != "wal" {
                    throw DatabaseError(
                        resultCode: .SQLITE_ERROR,
                        message: "cannot switch the database to WAL: it stays in \(mode ?? "unknown") mode")
                }
            } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY && ContinuousClock.now < deadline
            {
                Thread.sleep(forTimeInterval: Double(pause.milliseconds) / 1000)
                pause = min(pause * 2, .milliseconds(50))
            }
        }
    }

    /// Opens the file at `path`, creating it with mode 0600 when missing. Refuses, untouched,
    /// a file that is not SQLite, is truncated, holds someone else's tables, or was written by a
    /// newer CountdownStore: all of that is checked on a read-only connection first, because a
    /// read-write connection would already rewrite the header when it switches the file to WAL.
    ///
    /// One serialized connection (a `DatabaseQueue`): operations are short, ticks are computed in
    /// memory, and other processes still read and write beside it through WAL.
    static func open(path: String, busyTimeout: Duration, durability: CountdownStore.Durability) throws(CountdownError)
        -> DatabaseQueue
    {
        // Before anything uses SQLite in this process, when this is the first: its count of the
        // memory it allocates takes a mutex at every allocation (see shim.c).
        _ = countdown_skip_memory_statistics()
        // Run as root, SQLite would otherwise change nothing of the log files' owner at every
        // opening, and wait for their inode to do so behind a busy writer (see shim.c).
        _ = countdown_skip_needless_fchown()
        try createIfMissing(path)
        CrashPoints.reach(.fileCreated)
        try probe(path: path, busyTimeout: busyTimeout)
        let queue = try translatingErrorsNow(path: path) {
            try DatabaseQueue(
                path: gatheringWALWrites(path),
                configuration: grdbConfiguration(busyTimeout: busyTimeout, durability: durability))
        }
        CrashPoints.reach(.connectionOpened)
        return queue
    }

    /// The name that opens the file at `path` through the VFS that writes each commit's WAL
    /// frames in one write instead of two a frame (`walwrites.c`), around the default VFS: an SQLite
    /// URI, `file:PATH?vfs=countdown-wal`. `path` itself where SQLite takes no URIs (it would
    /// take that one for a file name) or the VFS cannot be used. Other processes and connections
    /// read and write the file as usual: only when this connection's writes reach the `-wal` file
    /// changes, never what they are, nor their order.
    static func gatheringWALWrites(_ path: String) -> String {
        // (A path of two slashes would read as a host's name; an empty one is a temporary file.)
        guard !path.isEmpty, !path.hasPrefix("//"), sqlite3_compileoption_used("USE_URI") == 1,
            let vfs = countdown_wal_vfs()
        else { return path }
        // A URI's path is percent-encoded, except the characters that cannot be mistaken.
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/-._~")
        guard let encoded = path.addingPercentEncoding(withAllowedCharacters: allowed) else { return path }
        return "file:\(encoded)?vfs=\(String(cString: vfs))"
    }

    /// Checks, without writing a byte, that the file at `path` is empty or a CountdownStore
    /// database this code can open. Waits up to `busyTimeout` for other processes' locks: a
    /// process opening the store beside running ones must not fail because they write.
    static func probe(path: String, busyTimeout: Duration) throws(CountdownError) {
        let place = quoted(path, limit: 200)
        try rollBackHotJournal(path: path, busyTimeout: busyTimeout)
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
        // The file format versions, both 1 (rollback journal) or both 2 (WAL). Anything else is
        // damage that SQLite may still read, but the switch to WAL would write over it.
        guard header[18] == header[19], [1, 2].contains(header[18]) else {
            throw CountdownError(
                .unreadableDatabase,
                "the database file at \(place) is damaged: "
                    + "its header gives file format versions \(header[18]) and \(header[19]) "
                    + "(both 1 or both 2 expected); it was left untouched"
            )
        }
        func uint32(_ offset: Int) -> Int {
            header[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
        }
        let rawPageSize = Int(header[16]) << 8 | Int(header[17])
        let pageSize = rawPageSize == 1 ? 65_536 : rawPageSize
        let pages = uint32(28)
        // The page count in the header is valid when "version-valid-for" matches the change counter.
        // A file shorter than that count is not always damaged: in WAL mode a checkpoint writes
        // page 1 (with the new count) before the pages that extend the file, so a checkpoint under
        // way in another process, or one a kill interrupted, leaves such a file while the WAL still
        // holds every page. Only SQLite, reading through the WAL, can tell: it is asked below.
        //
        // Asking means `PRAGMA quick_check`, which reads the whole file: seconds for a store of
        // millions, on every opening while a checkpoint runs beside it. So it is asked only when
        // the WAL beside the file is too small to hold the pages missing from it; a WAL that
        // could hold them is the checkpoint under way (and were the file damaged after all, the
        // first read of a missing page fails with SQLite's "malformed" error).
        let missingPages = pages - size / max(1, pageSize)
        let walSize = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
        let walHoldsMissing = walSize >= 32 + missingPages * (pageSize + 24)
        let shorterThanHeader = uint32(92) == uint32(24) && pages > 0 && pages * pageSize > size && !walHoldsMissing
        try translatingErrorsNow(path: path) {
            var configuration = GRDB.Configuration()
            configuration.readonly = true
            configuration.busyMode = busyMode(busyTimeout)
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? queue.close() }
            try queue.read { db in
                let tables = try String.fetchAll(
                    db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
                if !tables.isEmpty, !tables.contains(SQLiteMigrator.tableName) {
                    throw CountdownError(
                        .foreignDatabase,
                        "the file at \(place) is an SQLite database of something else (tables "
                            + "\(tables.prefix(5).map { quoted($0) }.joined(separator: ", "))); it was left untouched"
                    )
                }
                try SQLiteMigrator().checkNotNewer(db)
                if shorterThanHeader, try String.fetchAll(db, sql: "PRAGMA quick_check") != ["ok"] {
                    throw CountdownError(
                        .unreadableDatabase,
                        "the database file at \(place) is truncated: "
                            + "\(size) bytes where its header says \(pages * pageSize); it was left untouched"
                    )
                }
            }
        }
    }

    /// Lets SQLite roll back a hot rollback journal beside the file, which only a read-write
    /// connection can do.
    ///
    /// A store is in WAL mode from its first write, but the very first one (the switch to WAL of
    /// a new file) goes through a rollback journal: a power cut in the middle of it leaves page 1
    /// torn and a `-journal` that puts the file back as it was. Every SQLite client rolls such a
    /// journal back before its first read; the read-only check would instead fail with "attempt
    /// to write a readonly database" and refuse a file SQLite finds intact. A file that is not a
    /// database is left as it is: SQLite reads its header first and writes nothing.
    private static func rollBackHotJournal(path: String, busyTimeout: Duration) throws(CountdownError) {
        let journal = (try? FileManager.default.attributesOfItem(atPath: path + "-journal")[.size] as? Int) ?? nil
        guard let journal, journal > 0 else { return }
        do {
            var configuration = GRDB.Configuration()
            configuration.busyMode = busyMode(busyTimeout)
            // Opening reads the schema, which rolls a hot journal back under SQLite's own locks.
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            try queue.close()
        } catch let error as DatabaseError where [.SQLITE_NOTADB, .SQLITE_CORRUPT].contains(error.resultCode) {
            return  // not a database: the checks that follow say so
        } catch {
            throw CountdownError(storage: error, path: path)
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

/// Whether the busy handler of the store's own connections waits on this thread: an attempt to
/// take the write lock without waiting turns it off around its `BEGIN IMMEDIATE`.
enum BusyWait {
    private static let key = "CountdownStore.busyFailsFast"

    /// Whether a busy lock fails at once on this thread.
    static var failsFast: Bool {
        Thread.current.threadDictionary[key] != nil
    }

    /// Runs `body` with a busy lock failing at once on this thread.
    static func failingFast<T>(_ body: () throws -> T) rethrows -> T {
        let dictionary = Thread.current.threadDictionary
        dictionary[key] = true
        defer { dictionary.removeObject(forKey: key) }
        return try body()
    }
}
