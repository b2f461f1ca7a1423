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
        _ sql: String, bind: (inout Bindings) -> Void = { _ in }, row: (Columns) throws -> Void = { _ in }
    ) throws {
        try run(cachedStatement(sql: sql), bind: bind, row: row)
    }

    /// Runs `prepared` (a statement of this connection, looked up once for a loop of runs) with
    /// the values `bind` adds, calling `row` for each result row.
    func run(
        _ prepared: Statement, bind: (inout Bindings) -> Void = { _ in }, row: (Columns) throws -> Void = { _ in }
    ) throws {
        let statement = prepared.sqliteStatement
        sqlite3_reset(statement)
        // Every parameter NULL: `Bindings.addNull()` relies on it.
        sqlite3_clear_bindings(statement)
        defer { sqlite3_reset(statement) }
        var bindings = Bindings(statement: statement)
        bind(&bindings)
        while true {
            switch sqlite3_step(statement) {
            case SQLITE_ROW:
                try row(Columns(statement: statement))
            case SQLITE_DONE:
                return
            case let code:
                let message = sqliteConnection.map { String(cString: sqlite3_errmsg($0)) }
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: prepared.sql)
            }
        }
    }

    /// The rows of `sql`, each decoded by `decode`.
    func all<T>(_ sql: String, bind: (inout Bindings) -> Void = { _ in }, _ decode: (Columns) throws -> T) throws -> [T]
    {
        var values: [T] = []
        try run(sql, bind: bind) { values.append(try decode($0)) }
        return values
    }

    /// The first row of `sql`, decoded by `decode`; `nil` when there is none.
    func first<T>(_ sql: String, bind: (inout Bindings) -> Void = { _ in }, _ decode: (Columns) throws -> T) throws
        -> T?
    {
        var value: T?
        try run(sql, bind: bind) { columns in
            if value == nil { value = try decode(columns) }
        }
        return value
    }
}

/// The values bound to a statement's parameters, in order: each `add` binds the next one.
struct Bindings {
    let statement: OpaquePointer
    private var index: Int32 = 0

    init(statement: OpaquePointer) {
        self.statement = statement
    }

    mutating func add(_ value: Int64) {
        index += 1
        sqlite3_bind_int64(statement, index, value)
    }

    mutating func add(_ value: Int) {
        add(Int64(value))
    }

    mutating func add(_ value: Bool) {
        add(Int64(value ? 1 : 0))
    }

    mutating func add(_ value: String) {
        index += 1
        sqlite3_bind_text(statement, index, value, -1, sqliteTransient)
    }

    mutating func add(_ value: Int64?) {
        if let value { add(value) } else { addNull() }
    }

    mutating func add(_ value: String?) {
        if let value { add(value) } else { addNull() }
    }

    /// The raw value of a case, bound without a copy: SQLite copies a Swift string at every bind
    /// (an allocation each), where these few texts are kept for the life of the process.
    mutating func add<Value: RawRepresentable & Hashable>(_ value: Value, from texts: ConstantTexts<Value>) {
        index += 1
        if let text = texts.text(for: value) {
            sqlite3_bind_text(statement, index, text, -1, nil)  // SQLITE_STATIC
        } else {
            sqlite3_bind_text(statement, index, value.rawValue, -1, sqliteTransient)
        }
    }

    mutating func add(_ kind: CountdownKind) { add(kind, from: .kinds) }
    mutating func add(_ policy: CountdownPolicy) { add(policy, from: .policies) }
    mutating func add(_ state: CountdownState) { add(state, from: .states) }

    mutating func add(_ rule: CountdownRule?) {
        if let rule { add(rule, from: .rules) } else { addNull() }
    }

    /// Text as TEXT, bytes as BLOB.
    mutating func add(_ payload: CountdownPayload?) {
        switch payload {
        case .text(let text):
            add(text)
        case .bytes(let data):
            index += 1
            let position = index
            data.withUnsafeBytes { buffer in
                // A zero-length blob still needs a non-NULL pointer to be stored as a blob.
                _ = sqlite3_bind_blob(
                    statement, position, buffer.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(buffer.count),
                    sqliteTransient)
            }
        case nil:
            addNull()
        }
    }

    /// A NULL: nothing to bind, since `run(_:bind:row:)` cleared every binding of the statement
    /// (to NULL) just before.
    mutating func addNull() {
        index += 1
    }
}

/// The current row of a statement, read by column position. A NULL where a value is required
/// (a damaged row) throws instead of trapping.
struct Columns: RecordRow {
    let statement: OpaquePointer

    func isNull(_ column: Int) -> Bool {
        sqlite3_column_type(statement, Int32(column)) == SQLITE_NULL
    }

    func int(_ column: Int) throws -> Int64 {
        if isNull(column) { throw damaged(column) }
        return sqlite3_column_int64(statement, Int32(column))
    }

    func optionalInt(_ column: Int) -> Int64? {
        isNull(column) ? nil : sqlite3_column_int64(statement, Int32(column))
    }

    func bool(_ column: Int) throws -> Bool {
        try int(column) != 0
    }

    func text(_ column: Int) throws -> String {
        guard let text = optionalText(column) else { throw damaged(column) }
        return text
    }

    func optionalText(_ column: Int) -> String? {
        guard let bytes = sqlite3_column_text(statement, Int32(column)) else { return nil }
        let count = Int(sqlite3_column_bytes(statement, Int32(column)))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    /// TEXT as text, BLOB as bytes; numbers (only from outside writers) as their text.
    func payload(_ column: Int) -> CountdownPayload? {
        switch sqlite3_column_type(statement, Int32(column)) {
        case SQLITE_NULL:
            return nil
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(statement, Int32(column)))
            guard let bytes = sqlite3_column_blob(statement, Int32(column)), count > 0 else { return .bytes(Data()) }
            return .bytes(Data(bytes: bytes, count: count))
        default:
            return optionalText(column).map(CountdownPayload.text)
        }
    }

    private func damaged(_ column: Int) -> CountdownError {
        Self.damaged(
            column: sqlite3_column_name(statement, Int32(column)).map { String(cString: $0) } ?? "column \(column)")
    }
}

/// The raw values of an enumeration's cases as C strings that live as long as the process, for
/// binding without a copy (see ``Bindings/add(_:from:)``).
final class ConstantTexts<Value: RawRepresentable & Hashable>: @unchecked Sendable where Value.RawValue == String {
    // `@unchecked Sendable`: the table is written once, in `init`, and only read after; the texts
    // it points to are never freed or changed.
    private let texts: [Value: UnsafePointer<CChar>]

    init(_ cases: some Sequence<Value>) {
        texts = Dictionary(uniqueKeysWithValues: cases.map { ($0, UnsafePointer(strdup($0.rawValue)!)) })
    }

    func text(for value: Value) -> UnsafePointer<CChar>? {
        texts[value]
    }
}

extension ConstantTexts where Value == CountdownKind {
    static let kinds = ConstantTexts(CountdownKind.allCases)
}

extension ConstantTexts where Value == CountdownPolicy {
    static let policies = ConstantTexts(CountdownPolicy.allCases)
}

extension ConstantTexts where Value == CountdownState {
    static let states = ConstantTexts(CountdownState.allCases)
}

extension ConstantTexts where Value == CountdownRule {
    static let rules = ConstantTexts(CountdownRule.allCases)
}

/// SQLite's `SQLITE_TRANSIENT`: the value is copied at bind time.
private let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
