import CountdownStoreCore

/// What a transaction of an engine that speaks SQL supplies so that the reads and writes written
/// once in this target (``SQLStatements`` and the extensions of this protocol) run on it: a way to
/// run a statement, its rows decoded as records, and the few things only one engine does around
/// them (PostgreSQL's row locks and events written at the end of a transaction).
package protocol SQLTransaction {
    /// A result row, read by column position.
    associatedtype Row: RecordRow

    /// The statements, rendered in this engine's dialect.
    var statements: SQLStatements { get }

    /// Whether this transaction locks the rows it reads to change them until it ends (PostgreSQL's
    /// write transactions; SQLite's writer holds the whole database).
    var locksRows: Bool { get }

    /// Whether the reads that lock rows do so now (``locksRows``, unless the core asked for a read
    /// without row locks).
    var locksRowsNow: Bool { get }

    /// Runs `statement`, calling `row` for each result row, and returns how many rows it changed.
    @discardableResult
    func run(_ statement: SQLStatement, row: (Row) throws -> Void) throws -> Int

    /// An item's row, as the statements select it.
    func itemRecord(_ row: Row) throws -> ItemRecord

    /// An event's row, as the statements select it.
    func eventRecord(_ row: Row) throws -> EventRecord

    /// Makes the events this transaction wrote readable to its own reads (PostgreSQL inserts them
    /// at the end), and returns the highest event ID a read by ID may see, `nil` for any.
    func prepareEventReads(byID: Bool) throws -> Int64?

    /// Notes what this transaction now knows of the retired keys: that there are some (`true`),
    /// or nothing (`nil`), after some were removed.
    func noteRetiredKeys(_ any: Bool?)
}

extension SQLTransaction {
    /// Runs `statement`, and returns how many rows it changed.
    @discardableResult
    package func run(_ statement: SQLStatement) throws -> Int {
        try run(statement) { _ in }
    }

    /// The rows of `statement`, each decoded by `decode`.
    package func all<T>(_ statement: SQLStatement, _ decode: (Row) throws -> T) throws -> [T] {
        var values: [T] = []
        try run(statement) { values.append(try decode($0)) }
        return values
    }

    /// The first row of `statement`, decoded by `decode`; `nil` when there is none.
    package func first<T>(_ statement: SQLStatement, _ decode: (Row) throws -> T) throws -> T? {
        var value: T?
        try run(statement) { row in
            if value == nil { value = try decode(row) }
        }
        return value
    }
}
