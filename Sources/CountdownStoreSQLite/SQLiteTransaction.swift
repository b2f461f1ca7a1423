import CountdownStoreCore
import CountdownStoreSQL
import CSQLiteShim
import Foundation
import GRDB

/// One transaction's view of the tables.
///
/// Every statement is prepared once per connection and reused, and runs through
/// `Database.run(_:bind:row:)` (`Database+Statements.swift`): values bind and rows decode by position.
struct SQLiteTransaction: RepositoryWriting {
    let db: Database
    /// What this transaction has learnt once and need not ask again.
    let memo = Memo()

    final class Memo {
        /// Whether `countdown_retired_keys` holds any key (it changes only by `delete` and `deleteItems`).
        var anyRetiredKeys: Bool?
        /// The statements a transaction may run once per item (a group's starts), looked up once.
        var insertNew: Statement?
        var appendEvent: Statement?
        /// Events inserted ``EventRecord/rowsPerInsert`` to a statement.
        var appendEvents: Statement?
    }

    /// The connection's statement for `sql`, looked up once per transaction and kept in `slot`:
    /// the lookup hashes and compares its whole text, which costs more than binding it for one
    /// small row.
    func statement(_ slot: inout Statement?, _ sql: String) throws -> Statement {
        if let statement = slot { return statement }
        let statement = try db.cachedStatement(sql: sql)
        slot = statement
        return statement
    }

    init(db: Database) {
        self.db = db
    }

    /// The SQL of each listing shape, rendered on first use: a list's statement is then looked up
    /// without building its text again.
    static let listingSQL = Locked([Int: String]())

    /// A savepoint from statements prepared once per connection: a group commit opens one per
    /// write, where GRDB's `inSavepoint` would prepare two statements each time. Nested savepoints
    /// share the name; SQLite releases and rolls back the innermost of that name.
    func savepoint<T>(_ body: () throws -> T) throws -> T {
        guard db.isInsideTransaction else {
            var value: T?
            try db.inSavepoint {
                value = try body()
                return .commit
            }
            guard let value else { throw CountdownError(.storageFailure, "a savepoint ended without a value") }
            return value
        }
        try db.cachedStatement(sql: "SAVEPOINT countdown_write").execute()
        do {
            let value = try body()
            try db.cachedStatement(sql: "RELEASE SAVEPOINT countdown_write").execute()
            return value
        } catch {
            if db.isInsideTransaction {
                try? db.cachedStatement(sql: "ROLLBACK TO SAVEPOINT countdown_write").execute()
                try? db.cachedStatement(sql: "RELEASE SAVEPOINT countdown_write").execute()
            }
            throw error
        }
    }
}

// The statements written once for both engines (`CountdownStoreSQL`) run here.
extension SQLiteTransaction: SQLTransaction {
    /// The statements both engines run, in SQLite's dialect.
    static let sqlStatements = SQLStatements(.sqlite)

    var statements: SQLStatements { Self.sqlStatements }

    /// The writer holds the whole database: no row locks.
    var locksRows: Bool { false }
    var locksRowsNow: Bool { false }

    @discardableResult
    func run(_ statement: SQLStatement, row: (SQLiteRow) throws -> Void) throws -> Int {
        try db.run(statement, row: row)
        return db.changesCount
    }

    func itemRecord(_ row: SQLiteRow) throws -> ItemRecord {
        try ItemRecord(row: row)
    }

    func eventRecord(_ row: SQLiteRow) throws -> EventRecord {
        try EventRecord(row: row)
    }

    /// Events are inserted as they are appended, and every event committed is readable.
    func prepareEventReads(byID: Bool) throws -> Int64? {
        nil
    }

    func noteRetiredKeys(_ any: Bool?) {
        memo.anyRetiredKeys = any
    }
}
