import CountdownStoreCore
import Foundation
import GRDB

// What is SQLite's alone in the store's public API: opening a file or a host's GRDB database,
// that database, and folding its write-ahead log in.

extension CountdownStore {
    /// Opens (or creates, with mode 0600) the store at `path` and brings its schema up to date.
    ///
    /// - Throws: ``CountdownError`` when the file is not SQLite, belongs to something else,
    ///   was written by a newer CountdownStore, or cannot be opened. The file is never overwritten.
    public convenience init(path: String, configuration: Configuration = Configuration()) throws(CountdownError) {
        let queue = try DatabaseOpening.open(
            path: path, busyTimeout: configuration.busyTimeout, durability: configuration.durability)
        try self.init(sqlite: queue, path: path, owns: true, configuration: configuration)
    }

    /// Opens a store inside the host's own GRDB database (a `DatabaseQueue` or `DatabasePool`),
    /// whose connection settings stay the host's. The countdown tables and views are added
    /// beside the host's own tables.
    public convenience init(database: any DatabaseWriter, configuration: Configuration = Configuration()) throws(CountdownError) {
        try self.init(sqlite: database, path: nil, owns: false, configuration: configuration)
    }

    private convenience init(sqlite database: any DatabaseWriter, path: String?, owns: Bool, configuration: Configuration) throws(CountdownError) {
        let engine = try translatingErrorsNow(path: path) {
            try SQLiteRepository(
                writer: database, path: owns ? path : nil, busyTimeout: configuration.busyTimeout,
                durability: configuration.durability, clock: configuration.clock)
        }
        self.init(engine: engine, path: path, configuration: configuration)
    }

    /// The GRDB database the store writes to.
    public var database: any DatabaseWriter {
        guard let sqlite = engine as? SQLiteRepository else {
            preconditionFailure("this store is not on SQLite: it has no GRDB database")
        }
        return sqlite.writer
    }

    /// Folds the write-ahead log back into the database file and truncates it
    /// (`PRAGMA wal_checkpoint(TRUNCATE)`), waiting within the busy timeout for other writers.
    ///
    /// A store on its own file does this itself (its ticker's checkpointer; and SQLite, when the
    /// last connection to the file closes). A host that shares its GRDB database with the store
    /// may call it at its own shutdown, after its last write and after ``close()`` (which writes
    /// the lease), so that the file alone holds everything: on a shared database it is the one method that still works after ``close()``.
    /// Readers in other processes may keep part of the log in use; it is then left for a later
    /// checkpoint, just as durable.
    ///
    /// - Returns: whether the whole log was folded in and truncated; `true` for a database that is
    ///   not in WAL mode (it has no log).
    @discardableResult
    public func checkpointWAL() async throws(CountdownError) -> Bool {
        try await translatingErrors(path: path) { try await engine.checkpointLog() }
    }

}
