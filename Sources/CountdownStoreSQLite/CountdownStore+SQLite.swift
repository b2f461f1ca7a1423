import CountdownStoreCore
import Foundation
import GRDB

// What is SQLite's alone in the store's public API: opening a file or a host's GRDB database,
// that database, and folding its write-ahead log in.

extension CountdownStore {
    /// What only a store on SQLite has to say: how its connection waits for other processes.
    public struct SQLiteOptions: Sendable, Hashable {
        /// How long a write waits for another process's write lock before failing. Default: 10 s.
        public var busyTimeout: Duration

        /// Options with the stated defaults, any of which can be overridden here.
        public init(busyTimeout: Duration = .seconds(10)) {
            self.busyTimeout = busyTimeout
        }
    }

    /// Opens (or creates, with mode 0600) the store at `path` and brings its schema up to date.
    ///
    /// - Parameters:
    ///   - path: the database file.
    ///   - configuration: the store's settings. ``Configuration/durability`` is SQLite's
    ///     `synchronous` setting here: `NORMAL` for ``Durability/normal``, `FULL` for
    ///     ``Durability/full``.
    ///   - sqlite: SQLite's own settings; `nil`: the defaults (or the deprecated
    ///     ``Configuration/busyTimeout``, when set).
    /// - Throws: ``CountdownError`` when the file is not SQLite, belongs to something else,
    ///   was written by a newer CountdownStore, or cannot be opened. The file is never overwritten.
    public convenience init(
        path: String, configuration: Configuration = Configuration(), sqlite: SQLiteOptions? = nil
    ) throws(CountdownError) {
        let options = sqlite ?? SQLiteOptions(from: configuration)
        let queue = try DatabaseOpening.open(
            path: path, busyTimeout: options.busyTimeout, durability: configuration.durability)
        try self.init(sqlite: queue, path: path, owns: true, configuration: configuration, options: options)
    }

    /// Opens a store inside the host's own GRDB database (a `DatabaseQueue` or `DatabasePool`),
    /// whose connection settings stay the host's (``Configuration/durability`` does not change
    /// them). The countdown tables and views are added beside the host's own tables.
    /// `sqlite`: how long the store's writes wait for other processes' (`nil`: the defaults).
    public convenience init(
        database: any DatabaseWriter, configuration: Configuration = Configuration(), sqlite: SQLiteOptions? = nil
    ) throws(CountdownError) {
        try self.init(
            sqlite: database, path: nil, owns: false, configuration: configuration,
            options: sqlite ?? SQLiteOptions(from: configuration))
    }

    private convenience init(
        sqlite database: any DatabaseWriter, path: String?, owns: Bool, configuration: Configuration,
        options: SQLiteOptions
    ) throws(CountdownError) {
        let engine = try translatingErrorsNow(path: path) {
            try SQLiteEngine(
                writer: database, path: owns ? path : nil, busyTimeout: options.busyTimeout,
                durability: configuration.durability, clock: configuration.clock)
        }
        self.init(engine: engine, path: path, configuration: configuration)
    }

    /// The GRDB database the store writes to, or `nil` for a store on another engine.
    public var sqliteDatabase: (any DatabaseWriter)? {
        (engine as? SQLiteEngine)?.writer
    }

    /// The GRDB database the store writes to. Stops the process on a store of another engine:
    /// use ``sqliteDatabase``, `nil` there.
    @available(
        *, deprecated,
        message: "use sqliteDatabase, which is nil for a store on another engine instead of stopping the process"
    )
    public var database: any DatabaseWriter {
        guard let database = sqliteDatabase else {
            preconditionFailure("this store is not on SQLite: it has no GRDB database")
        }
        return database
    }

    /// Folds the write-ahead log back into the database file and truncates it
    /// (`PRAGMA wal_checkpoint(TRUNCATE)`), waiting within the busy timeout for other writers.
    ///
    /// A store on its own file does this itself (its ticker's checkpointer; and SQLite, when the
    /// last connection to the file closes). A host that shares its GRDB database with the store
    /// may call it at its own shutdown, after its last write and after ``close()`` (which writes
    /// the lease), so that the file alone holds everything: on a shared database it is the one
    /// method that still works after ``close()``.
    /// Readers in other processes may keep part of the log in use; it is then left for a later
    /// checkpoint, just as durable.
    ///
    /// - Returns: whether the whole log was folded in and truncated; `true` for a database that is
    ///   not in WAL mode (it has no log).
    @discardableResult
    public func checkpointWAL() async throws(CountdownError) -> Bool {
        // A store on another engine has no log of this kind.
        guard let engine = engine as? SQLiteEngine else { return true }
        return try await translatingErrors(path: path) { try await engine.checkpointLog() }
    }

}

extension CountdownStore.SQLiteOptions {
    /// The defaults, with the busy timeout a configuration still carries (deprecated there).
    init(from configuration: CountdownStore.Configuration) {
        self.init(busyTimeout: configuration.sqliteBusyTimeout ?? .seconds(10))
    }
}
