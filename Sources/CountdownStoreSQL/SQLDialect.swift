/// The SQL an engine speaks: its placeholders, the prefix of its tables' names and the few
/// spellings in which the engines differ (see ``SQL``).
package struct SQLDialect: Sendable, Hashable {
    /// The engines that speak SQL.
    package enum Engine: Sendable, Hashable {
        /// `?` placeholders (`?n` where a statement repeats or reorders its arguments), no schema.
        case sqlite
        /// `$n` placeholders, tables in the store's schema.
        case postgres
    }

    /// The engine.
    package let engine: Engine
    /// What comes before a table's name: the quoted schema and a dot, or nothing.
    package let tablePrefix: String

    /// SQLite's: its tables are the database file's own.
    package static let sqlite = SQLDialect(engine: .sqlite, tablePrefix: "")

    /// PostgreSQL's, for tables in the schema that `tablePrefix` names (`"schema".`, or nothing
    /// for the connection's search path).
    package static func postgres(tablePrefix: String) -> SQLDialect {
        SQLDialect(engine: .postgres, tablePrefix: tablePrefix)
    }

    /// The placeholder of argument `number` (from 1): `$n` on PostgreSQL, `?` or `?n` on SQLite
    /// (`numbered`: when a statement repeats or reorders its arguments).
    package func placeholder(_ number: Int, numbered: Bool = true) -> String {
        switch engine {
        case .sqlite: numbered ? "?\(number)" : "?"
        case .postgres: "$\(number)"
        }
    }

    /// `count` placeholders separated by commas, numbered from `first`, as an `IN` list writes them.
    package func placeholders(count: Int, from first: Int = 1) -> String {
        switch engine {
        case .sqlite: Array(repeating: "?", count: count).joined(separator: ",")
        case .postgres: (first..<first + count).map { "$\($0)" }.joined(separator: ",")
        }
    }
}
