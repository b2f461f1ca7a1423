/// The text of a statement written once for every engine that speaks SQL: a string literal whose
/// interpolations stand for what the engines spell differently.
///
/// - `\(arg: n)` is the statement's argument `n` (from 1): `$n` on PostgreSQL; on SQLite `?` when
///   the statement takes its arguments once each and in order, `?n` otherwise. `\(arg: n, as: type)`
///   casts it on PostgreSQL (SQLite's values carry their own types).
/// - `\(table: name)` is a table, in the store's schema where the engine has one.
/// - `\(sqlite: …, postgres: …)` is what only one engine writes (either may be left out): a row
///   lock, an index named for SQLite's planner, a function's name.
/// - `\(raw: text)` is text written out as it is (a constant list of columns), `\(sql)` another
///   statement's text.
///
///     let cursor: SQL = """
///         SELECT last_event_id FROM \(table: "countdown_consumers") WHERE name = \(arg: 1)
///         """
///
/// A statement is rendered for an engine once (``rendered(for:)``), when the engine's statements
/// are made (``SQLStatements``); each run then pairs that text with its arguments
/// (``SQLStatement``), so no run builds a text again.
package struct SQL: Sendable, Hashable, ExpressibleByStringInterpolation {
    fileprivate indirect enum Piece: Sendable, Hashable {
        case text(String)
        case argument(Int, cast: String?)
        case table(String)
        case dialect(sqlite: SQL, postgres: SQL)
    }

    fileprivate private(set) var pieces: [Piece]

    package init(stringLiteral value: String) {
        pieces = [.text(value)]
    }

    package init(stringInterpolation: StringInterpolation) {
        pieces = stringInterpolation.pieces
    }

    /// The pieces of a statement as its literal writes them.
    package struct StringInterpolation: StringInterpolationProtocol {
        fileprivate var pieces: [Piece] = []

        package init(literalCapacity: Int, interpolationCount: Int) {
            pieces.reserveCapacity(2 * interpolationCount + 1)
        }

        package mutating func appendLiteral(_ literal: String) {
            if !literal.isEmpty { pieces.append(.text(literal)) }
        }

        /// The statement's argument `number` (from 1), cast to `type` on PostgreSQL.
        package mutating func appendInterpolation(arg number: Int, as type: String? = nil) {
            pieces.append(.argument(number, cast: type))
        }

        /// The table `name`, in the store's schema where the engine has one.
        package mutating func appendInterpolation(table name: String) {
            pieces.append(.table(name))
        }

        /// `sqlite` on SQLite, `postgres` on PostgreSQL.
        package mutating func appendInterpolation(sqlite: SQL = "", postgres: SQL = "") {
            pieces.append(.dialect(sqlite: sqlite, postgres: postgres))
        }

        /// Another statement's text, in place.
        package mutating func appendInterpolation(_ sql: SQL) {
            pieces += sql.pieces
        }

        /// `text` as it is: a constant of the code (a list of columns), never a value.
        package mutating func appendInterpolation(raw text: String) {
            pieces.append(.text(text))
        }
    }

    /// `lhs` followed by `rhs`.
    package static func + (lhs: SQL, rhs: SQL) -> SQL {
        var sql = lhs
        sql.pieces += rhs.pieces
        return sql
    }

    /// SQLite's `max` of several values, PostgreSQL's `greatest`.
    package static let greatest: SQL = "\(sqlite: "max", postgres: "greatest")"
    /// SQLite's `min` of several values, PostgreSQL's `least`.
    package static let least: SQL = "\(sqlite: "min", postgres: "least")"

    /// The text in `dialect`'s placeholders, table names and spellings.
    package func rendered(for dialect: SQLDialect) -> String {
        var flat: [Piece] = []
        flatten(into: &flat, for: dialect.engine)
        // `?` as it is where the arguments come once each and in order: no text to number.
        let numbers = flat.compactMap { piece -> Int? in
            if case .argument(let number, _) = piece { return number }
            return nil
        }
        let numbered = numbers != Array(stride(from: 1, through: numbers.count, by: 1))
        var text = ""
        for piece in flat {
            switch piece {
            case .text(let literal):
                text += literal
            case .argument(let number, let cast):
                text += dialect.placeholder(number, numbered: numbered)
                if dialect.engine == .postgres, let cast { text += "::" + cast }
            case .table(let name):
                text += dialect.tablePrefix + name
            case .dialect:
                break
            }
        }
        return text
    }

    /// The pieces with every dialect switch resolved for `engine`.
    private func flatten(into flat: inout [Piece], for engine: SQLDialect.Engine) {
        for piece in pieces {
            if case .dialect(let sqlite, let postgres) = piece {
                (engine == .sqlite ? sqlite : postgres).flatten(into: &flat, for: engine)
            } else {
                flat.append(piece)
            }
        }
    }
}
