import Foundation

/// One numbered SQL file of `Migrations/<engine>/`, embedded in the engine's binary at build time.
package struct Migration: Sendable, Hashable {
    /// Creates a migration from its file name and text.
    package init(name: String, sql: String) {
        self.name = name
        self.sql = sql
    }

    /// The file name, for example `0001_core_tables.sql`: the migration's identity forever.
    package let name: String
    /// The file's exact text.
    package let sql: String
}

extension Migration {
    /// Throws ``CountdownError/Code/schemaTooNew`` when `applied`, the migrations a database
    /// records, names one that `known` (this build's) does not hold: a newer CountdownStore wrote it.
    package static func checkNotNewer(applied: [String], known: [Migration]) throws {
        let names = Set(known.map(\.name))
        let unknown = applied.filter { !names.contains($0) }
        if !unknown.isEmpty {
            throw CountdownError(
                .schemaTooNew,
                "the database schema is newer than this CountdownStore: "
                    + "it records migration \(unknown.map { quoted($0) }.joined(separator: ", ")), "
                    + "which this version does not know; the database was left untouched"
            )
        }
    }
}
