import CSQLiteShim
import Foundation

/// A bare SQLite connection through the C API: the baseline every figure is compared with.
///
/// It opens files with the store's connection settings (WAL, `synchronous=NORMAL`,
/// `trusted_schema=OFF`, defensive mode, a busy timeout, and the multi-thread mode GRDB opens
/// its connections in, `SQLITE_OPEN_NOMUTEX`: each connection is used by one thread at a time)
/// and does nothing more.
final class RawDatabase {
    let handle: OpaquePointer

    /// Opens `path` with the store's settings; `fullSync` is the store's `.full` durability.
    init(path: String, fullSync: Bool = false) throws {
        var db: OpaquePointer?
        let code = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        guard code == SQLITE_OK, let db else {
            if let db { sqlite3_close_v2(db) }
            throw BenchmarkError("cannot open \(path): SQLite code \(code)")
        }
        handle = db
        sqlite3_busy_timeout(db, 10_000)
        try execute("PRAGMA journal_mode = WAL")
        try execute(fullSync ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
        try execute("PRAGMA trusted_schema = OFF")
        _ = countdown_enable_defensive(db)
    }

    deinit {
        sqlite3_close_v2(handle)
    }

    func execute(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &message)
        if code != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? "code \(code)"
            sqlite3_free(message)
            throw BenchmarkError("\(sql): \(text)")
        }
    }

    func prepare(_ sql: String) throws -> RawStatement {
        try RawStatement(database: self, sql: sql)
    }

    var errorMessage: String { String(cString: sqlite3_errmsg(handle)) }
}

/// A prepared statement, reset and rebound for every use.
final class RawStatement {
    let statement: OpaquePointer
    let database: RawDatabase

    init(database: RawDatabase, sql: String) throws {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(database.handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK,
            let statement
        else {
            throw BenchmarkError("cannot prepare \(sql): \(database.errorMessage)")
        }
        self.statement = statement
        self.database = database
    }

    deinit {
        sqlite3_finalize(statement)
    }

    /// Resets the statement and binds `values` (Int64, String or nil) to its parameters.
    @discardableResult
    func bind(_ values: [RawValue]) -> RawStatement {
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
        for (index, value) in values.enumerated() {
            let position = Int32(index + 1)
            switch value {
            case .int(let number): sqlite3_bind_int64(statement, position, number)
            case .text(let text): sqlite3_bind_text(statement, position, text, -1, sqliteTransient)
            case .null: sqlite3_bind_null(statement, position)
            }
        }
        return self
    }

    /// Steps once: `true` when a row is ready.
    func step() throws -> Bool {
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw BenchmarkError("step failed: \(database.errorMessage)")
        }
    }

    /// Runs the statement to completion.
    func run() throws {
        while try step() {}
    }

    func int(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }
    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }
    func text(_ column: Int32) -> String? {
        guard let bytes = sqlite3_column_text(statement, column) else { return nil }
        return String(cString: bytes)
    }
}

/// A value to bind.
enum RawValue {
    case int(Int64)
    case text(String)
    case null
}

/// SQLite's `SQLITE_TRANSIENT`: the text is copied at bind time.
private let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// A benchmark that could not run.
struct BenchmarkError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
