import CountdownStoreCore
import Foundation
import GRDB

/// Applies the embedded migrations in order, each in its own transaction, recorded by file name
/// in `countdown_migrations`. Refuses, without changing anything, a database that records a
/// migration this code does not know: it was written by a newer CountdownStore.
struct SQLiteMigrator: Sendable {
    var migrations: [Migration] = Migration.embedded

    static let tableName = "countdown_migrations"

    /// Names of the migrations the database records, in the order they were applied.
    static func applied(_ db: Database) throws -> [String] {
        guard try db.tableExists(tableName) else { return [] }
        return try String.fetchAll(db, sql: "SELECT name FROM \(tableName) ORDER BY rowid")
    }

    /// Throws ``CountdownError/Code/schemaTooNew`` if the database records unknown migrations.
    func checkNotNewer(_ db: Database) throws {
        try Migration.checkNotNewer(applied: try Self.applied(db), known: migrations)
    }

    /// Applies every pending migration, up to and including `last` when given; returns the names
    /// of the migrations this call applied.
    @discardableResult
    func migrate(_ writer: any DatabaseWriter, upTo last: String? = nil) throws -> [String] {
        try writer.unsafeReentrantWrite { db in
            var appliedNow: [String] = []
            try checkNotNewer(db)
            // Nothing pending: no transaction at all. Even an empty write transaction makes SQLite
            // rewrite parts of the header, and opening must not write to a file it only reads.
            let wanted = migrations.prefix { $0.name != last }.map(\.name) + (last.map { [$0] } ?? [])
            if Set(wanted).isSubset(of: Set(try Self.applied(db))) { return appliedNow }
            for migration in migrations {
                try db.inTransaction(.immediate) {
                    // Checked again under the write lock: another process may have applied it meanwhile.
                    try checkNotNewer(db)
                    try db.execute(
                        sql:
                            "CREATE TABLE IF NOT EXISTS \(Self.tableName) "
                            + "(name TEXT PRIMARY KEY, applied_at_ms INTEGER NOT NULL)"
                    )
                    let done =
                        try Bool.fetchOne(
                            db, sql: "SELECT 1 FROM \(Self.tableName) WHERE name = ?", arguments: [migration.name])
                        ?? false
                    if !done {
                        appliedNow.append(migration.name)
                        try db.execute(sql: migration.sql)
                        try db.execute(
                            sql: "INSERT INTO \(Self.tableName) (name, applied_at_ms) VALUES (?, ?)",
                            arguments: [migration.name, Date().millisecondsSince1970])
                        CrashPoints.reach(.migrationBeforeCommit)
                    }
                    return .commit
                }
                if appliedNow.last == migration.name { CrashPoints.reach(.migrationAfterCommit) }
                if migration.name == last { break }
            }
            return appliedNow
        }
    }
}

extension Migration {
    /// Every migration of this engine's folder of `Migrations/`, in the order they apply (embedded
    /// at build time: see `embedded-files.json`).
    static let embedded: [Migration] = EmbeddedMigrations.files.map { Migration(name: $0.name, sql: $0.text) }
}
