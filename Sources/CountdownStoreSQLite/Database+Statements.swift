import CountdownStoreCore
import CountdownStoreSQL
import CSQLiteShim
import Foundation
import GRDB

/// Runs GRDB's cached statements through the SQLite C API: values bind and columns decode by
/// position with no intermediate row or argument objects, so a query costs what SQLite costs.
///
/// GRDB still prepares and caches every statement and owns the connection and its transactions;
/// SQLite's own hooks (which GRDB's observation uses) see every change as usual.
extension Database {
    /// Runs the statement for `sql` (prepared once per connection) with the values `bind` adds,
    /// calling `row` for each result row.
    func run(
        _ sql: String, bind: (inout SQLiteBindings) -> Void = { _ in }, row: (SQLiteRow) throws -> Void = { _ in }
    ) throws {
        try run(cachedStatement(sql: sql), bind: bind, row: row)
    }

    /// Runs `prepared` (a statement of this connection, looked up once for a loop of runs) with
    /// the values `bind` adds, calling `row` for each result row.
    func run(
        _ prepared: Statement, bind: (inout SQLiteBindings) -> Void = { _ in },
        row: (SQLiteRow) throws -> Void = { _ in }
    ) throws {
        let statement = prepared.sqliteStatement
        sqlite3_reset(statement)
        // Every parameter NULL: `SQLiteBindings.addNull()` relies on it.
        sqlite3_clear_bindings(statement)
        defer { sqlite3_reset(statement) }
        var bindings = SQLiteBindings(statement: statement)
        bind(&bindings)
        while true {
            switch sqlite3_step(statement) {
            case SQLITE_ROW:
                try row(SQLiteRow(statement: statement))
            case SQLITE_DONE:
                return
            case let code:
                let message = sqliteConnection.map { String(cString: sqlite3_errmsg($0)) }
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: prepared.sql)
            }
        }
    }

    /// The rows of `sql`, each decoded by `decode`.
    func all<T>(_ sql: String, bind: (inout SQLiteBindings) -> Void = { _ in }, _ decode: (SQLiteRow) throws -> T)
        throws -> [T]
    {
        var values: [T] = []
        try run(sql, bind: bind) { values.append(try decode($0)) }
        return values
    }

    /// The first row of `sql`, decoded by `decode`; `nil` when there is none.
    func first<T>(_ sql: String, bind: (inout SQLiteBindings) -> Void = { _ in }, _ decode: (SQLiteRow) throws -> T)
        throws
        -> T?
    {
        var value: T?
        try run(sql, bind: bind) { columns in
            if value == nil { value = try decode(columns) }
        }
        return value
    }

    /// Runs `statement`, calling `row` for each result row: through the statement this
    /// connection keeps for its text, or, for a text written for one run (a write), through GRDB
    /// as a whole, without keeping it.
    func run(_ statement: SQLStatement, row: (SQLiteRow) throws -> Void = { _ in }) throws {
        guard statement.isReused else {
            try execute(sql: statement.sql, arguments: StatementArguments(statement.arguments.map(\.databaseValue)))
            return
        }
        try run(statement.sql, bind: { values in statement.arguments.forEach { values.add($0) } }, row: row)
    }
}

extension SQLValue {
    /// The value as GRDB binds it.
    fileprivate var databaseValue: DatabaseValue {
        switch self {
        case .int(let number): number.databaseValue
        case .text(let text): text.databaseValue
        case .bytes(let data): data.databaseValue
        case .bool(let flag): flag.databaseValue
        case .null: .null
        }
    }
}
