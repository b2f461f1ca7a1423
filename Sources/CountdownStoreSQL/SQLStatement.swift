/// A statement as an engine runs it: its text, rendered in the engine's dialect (once, for a
/// statement of fixed text: see ``SQLStatements``), and its arguments in order.
package struct SQLStatement: Sendable, Hashable {
    /// The text, in the engine's placeholders.
    package var sql: String
    /// The values of its placeholders, in order.
    package var arguments: [SQLValue]
    /// Whether the engine keeps the statement prepared for its next run: not for a text written
    /// for one run only (a list of values written out), which would only crowd its cache.
    package var isReused: Bool

    /// `sql` binding `arguments`.
    package init(_ sql: String, _ arguments: [SQLValue] = [], reused: Bool = true) {
        self.sql = sql
        self.arguments = arguments
        self.isReused = reused
    }
}
