import CountdownStoreCore
import CountdownStoreSQL
import CSQLiteShim
import Foundation

/// The values bound to a statement's parameters, in order: each `add` binds the next one.
struct SQLiteBindings {
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

    /// A value of a statement written once for every engine (``SQLStatement``).
    mutating func add(_ value: SQLValue) {
        switch value {
        case .int(let number): add(number)
        case .text(let text): add(text)
        case .bytes(let data): add(CountdownPayload.bytes(data))
        case .bool(let flag): add(flag)
        case .null: addNull()
        }
    }
}

/// SQLite's `SQLITE_TRANSIENT`: the value is copied at bind time.
private let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
