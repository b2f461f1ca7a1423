import CountdownStoreCore
import CSQLiteShim
import Foundation
import GRDB

// The store's writes inside the host's own GRDB transaction.
extension CountdownStore {
    /// The store's writes inside the transaction the host holds on `db`, the store's own GRDB
    /// database (the one the store was opened on with ``init(database:configuration:sqlite:)``,
    /// or a connection to the same file), inside the host's `write { }`:
    ///
    /// ```swift
    /// try orders.write { db in
    ///     try db.execute(sql: "INSERT INTO orders (id, total) VALUES (?, ?)", arguments: [1043, 4990])
    ///     try store.transaction(in: db).start("order-1043", duration: .seconds(15 * 60), group: "payments")
    /// }   // both commit, or neither does
    /// ```
    ///
    /// Each call returns what it would return alone. The ticker, event streams and metrics hear
    /// of the writes once the host's transaction commits; a rollback leaves no trace.
    ///
    /// - Throws: ``CountdownError/Code/invalidArgument`` when `db` is not inside a transaction
    ///   or is a connection to another file; ``CountdownError/Code/wrongState`` for a store on
    ///   another engine.
    public func transaction(in db: Database) throws(CountdownError) -> CountdownTransaction {
        guard let engine = engine as? SQLiteEngine else {
            throw CountdownError(.wrongState, "this store is not on SQLite: it cannot join a GRDB transaction")
        }
        guard db.isInsideTransaction else {
            throw CountdownError(
                .invalidArgument, "the GRDB database is not inside a transaction: call this inside its write { }")
        }
        let hostFile = Self.fileName(of: db)
        guard hostFile == engine.writer.path || hostFile == Self.resolved(engine.writer.path) else {
            throw CountdownError(
                .invalidArgument,
                "the GRDB database is \(quoted(hostFile)), not the store's database \(quoted(engine.writer.path))")
        }
        let transaction = CountdownTransaction(store: self, rows: SQLiteTransaction(db: db))
        db.afterNextTransaction { _ in
            transaction.committed()
        } onRollback: { _ in
            transaction.rolledBack()
        }
        return transaction
    }

    /// The file of the main database of the connection `db`.
    private static func fileName(of db: Database) -> String {
        guard let name = sqlite3_db_filename(db.sqliteConnection, "main") else { return "" }
        return String(cString: name)
    }

    /// `path` with symbolic links resolved, as SQLite names a file it opened.
    private static func resolved(_ path: String) -> String {
        URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    }
}
