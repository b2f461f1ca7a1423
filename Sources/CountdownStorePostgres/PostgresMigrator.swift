import CountdownStoreCore
import Foundation
import PostgresNIO

/// Brings a PostgreSQL database up to this build's schema (`Migrations/postgres/`), in the
/// store's schema, and writes a new store's first clock row: all in one transaction, under a
/// transaction-scoped advisory lock, so hosts opening one new database at once take turns and
/// nothing outlives the transaction (PgBouncer's transaction pooling keeps working).
enum PostgresMigrator {
    static let tableName = "countdown_migrations"

    /// The migrations the database records, in the order they were applied.
    static func applied(_ tx: PostgresTransaction) throws -> [String] {
        let exists =
            try tx.run(
                "SELECT to_regclass($1) IS NOT NULL", [.text(tx.engine.prefix + tableName)]
            ).rows.first?.decode(Bool.self) ?? false
        guard exists else { return [] }
        return try tx.run("SELECT name FROM \(tx.engine.prefix)\(tableName) ORDER BY applied_order").rows.map {
            try $0.decode(String.self)
        }
    }

    /// Applies what is pending and starts the clocks of a new store; refuses, having changed
    /// nothing, a database that records a migration this build does not know.
    static func prepare(_ tx: PostgresTransaction, firstReading: ClockReading, upTo last: String? = nil) throws {
        let engine = tx.engine
        try tx.run("SELECT pg_advisory_xact_lock(hashtext($1))", [.text("CountdownStore:" + (engine.schema ?? ""))])
        try checkNotNewer(tx)
        if let schema = engine.schema {
            let present =
                try tx.run("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", [.text(schema)])
                .rows.first?.decode(Bool.self) ?? false
            if !present { try tx.execute("CREATE SCHEMA \(quotedIdentifier(schema))") }
        }
        try tx.execute(
            """
            CREATE TABLE IF NOT EXISTS \(engine.prefix)\(tableName) (
                name text PRIMARY KEY, applied_at_ms bigint NOT NULL,
                applied_order bigint GENERATED ALWAYS AS IDENTITY)
            """)
        let done = Set(try applied(tx))
        for migration in Migration.embedded where !done.contains(migration.name) {
            if let schema = engine.schema { try tx.execute("SET LOCAL search_path TO \(quotedIdentifier(schema))") }
            for statement in statements(of: migration.sql) { try tx.execute(statement) }
            try tx.execute("RESET search_path")
            try tx.run(
                "INSERT INTO \(engine.prefix)\(tableName) (name, applied_at_ms) "
                    + "VALUES ($1, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)",
                [.text(migration.name)])
            if migration.name == last { break }
        }
        if try applied(tx).contains(contractMigration) { try writeContractRow(tx) }
        _ = try FirstClockRow.write(tx, place: engine.place) { try tx.clockReading(firstReading) }
    }

    /// The migration that adds the SQL contract's functions and their `countdown_contract` row.
    static let contractMigration = "0008_sql_contract.sql"

    /// Writes what the SQL contract's functions need to know of this store that its schema's
    /// name decides (its NOTIFY channel and its event writers' lock class), unless it is there
    /// already: no write at all when nothing changed.
    static func writeContractRow(_ tx: PostgresTransaction) throws {
        let table = tx.engine.prefix + "countdown_contract"
        try tx.run(
            """
            INSERT INTO \(table) AS c (id, channel, event_lock_class) VALUES (1, $1, $2::integer)
            ON CONFLICT (id) DO UPDATE SET channel = excluded.channel, event_lock_class = excluded.event_lock_class
            WHERE (c.channel, c.event_lock_class) IS DISTINCT FROM (excluded.channel, excluded.event_lock_class)
            """, [.text(tx.engine.channel), .int(Int64(tx.engine.eventLockClass))])
    }

    /// Throws ``CountdownError/Code/schemaTooNew`` if the database records unknown migrations.
    static func checkNotNewer(_ tx: PostgresTransaction) throws {
        try Migration.checkNotNewer(applied: try applied(tx), known: Migration.embedded)
    }

    /// What is wrong with the store's rows, or `["ok"]`.
    static func integrityProblems(_ tx: PostgresTransaction) throws -> [String] {
        var problems: [String] = []
        if try tx.checkpoint() == nil { problems.append("the countdown_clock row is missing") }
        let leases = try tx.run("SELECT count(*) FROM \(tx.engine.prefix)countdown_lease WHERE id = 1").rows.first?
            .decode(Int64.self)
        if leases != 1 { problems.append("the countdown_lease row is missing") }
        return problems.isEmpty ? ["ok"] : problems
    }

    /// The statements of a migration file: each ends with `;` at the end of a line, outside a
    /// function's body (between a line holding `$$` and the next); comment lines are dropped.
    static func statements(of sql: String) -> [String] {
        var statements: [String] = []
        var current = ""
        // Inside a function's body, quoted by `$$`, a line ending with `;` ends nothing.
        var inBody = false
        for line in sql.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if !inBody && (trimmed.hasPrefix("--") || trimmed.isEmpty) { continue }
            current += line + "\n"
            if trimmed.components(separatedBy: "$$").count % 2 == 0 { inBody.toggle() }
            if !inBody && trimmed.hasSuffix(";") {
                statements.append(current)
                current = ""
            }
        }
        if !current.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { statements.append(current) }
        return statements
    }

    /// `name` as a PostgreSQL identifier, in double quotes.
    static func quotedIdentifier(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

extension Migration {
    /// Every migration of this engine's folder of `Migrations/`, in the order they apply (embedded
    /// at build time: see `embedded-files.json`).
    static let embedded: [Migration] = EmbeddedMigrations.files.map { Migration(name: $0.name, sql: $0.text) }
}
