import Foundation
import GRDB
import Testing

@testable import CountdownStoreCore
@testable import CountdownStoreSQLite

/// The queries' plans on SQLite: each reads through an index, never a scan of the table, with or
/// without statistics. Its `TracedStore` records the statements a store executes, for the SQLite
/// suites that read them.
@Suite("Queries on SQLite")
struct QuerySQLiteTests {
    /// A store on a host DatabaseQueue whose every executed statement is recorded with its arguments.
    final class TracedStore: Sendable {
        let folder: TemporaryFolder
        let clock = VirtualClock()
        let store: CountdownStore
        let queue: DatabaseQueue
        private let statements = Locked<[String]>([])

        init(configure: (inout CountdownStore.Configuration) -> Void = { _ in }) throws {
            folder = try TemporaryFolder()
            var configuration = GRDB.Configuration()
            configuration.publicStatementArguments = true
            let recorded = statements
            configuration.prepareDatabase { db in
                db.trace { event in
                    if case .statement(let statement) = event {
                        recorded.withLock { $0.append(statement.expandedSQL) }
                    }
                }
            }
            queue = try DatabaseQueue(path: folder.path(), configuration: configuration)
            var storeConfiguration = CountdownStore.Configuration(clock: clock)
            storeConfiguration.stopTimeout = Fixture.stopTimeout
            configure(&storeConfiguration)
            store = try CountdownStore(database: queue, configuration: storeConfiguration)
        }

        /// The statements `body` executed that read the countdowns table.
        func selects(during body: () async throws -> Void) async throws -> [String] {
            statements.withLock { $0.removeAll() }
            try await body()
            return statements.withLock { $0 }.filter { $0.hasPrefix("SELECT") && $0.contains("FROM countdowns") }
        }

        /// Every statement `body` executed.
        func allStatements(during body: () async throws -> Void) async throws -> [String] {
            statements.withLock { $0.removeAll() }
            try await body()
            return statements.withLock { $0 }
        }

        func plan(_ sql: String) throws -> String {
            try queue.read { db in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql).map { $0["detail"] as String }.joined(separator: " | ")
            }
        }
    }

    @Test("Next deadline and the soonest active items come from indexes, never a scan")
    func nextDeadlineAndTopNUseIndexes() async throws {
        let traced = try TracedStore()
        let store = traced.store
        try await store.start((0..<300).map {
            .countdown("k\($0)", duration: .seconds(Int64($0 * 7 % 300) + 1), group: "g\($0 % 3)", policy: $0.isMultiple(of: 2) ? .wall : .active)
        })
        try await store.pause("k5")
        // Without statistics SQLite once preferred sorting every paused item (through the
        // state index) to walking the index already in order: plans must not depend on them.
        for analyzed in [false, true] {
        if analyzed { try await store.grdb.write { db in try db.execute(sql: "ANALYZE") } }
        for (name, body) in [
            ("nextDeadline", { _ = try await store.nextDeadline() }),
            ("active", { _ = try await store.active(limit: 20) }),
            ("active by group", { _ = try await store.active(group: "g1", limit: 20) }),
            ("paused", { _ = try await store.paused(limit: 20) }),
            ("expired", { _ = try await store.expired(limit: 20) }),
            ("expired by group", { _ = try await store.expired(group: "g1", limit: 20) }),
            ("stopwatches", { _ = try await store.active(limit: 1000) }),
            ("cancelled", { _ = try await store.list(.cancelled, limit: 20) }),
            ("everything", { _ = try await store.list(.all, group: "g2", limit: 1000) }),
            ("expiring", { _ = try await store.expiring(within: .seconds(30)) }),
            ("expireDue", { _ = try await store.expireDue() }),
        ] as [(String, () async throws -> Void)] {
            let selects = try await traced.selects(during: body)
            #expect(!selects.isEmpty, "\(name) ran a query")
            for sql in selects {
                let plan = try traced.plan(sql)
                let usesIndex = plan.contains("USING INDEX countdowns_") || plan.contains("USING COVERING INDEX countdowns_")
                    || plan.contains("sqlite_autoindex_countdowns") || plan.contains("INTEGER PRIMARY KEY")
                // "SCAN countdowns" alone is a full table scan; "SCAN … USING INDEX" walks an index in order up to LIMIT.
                let fullScan = plan.split(separator: "|").contains { $0.trimmingCharacters(in: .whitespaces) == "SCAN countdowns" }
                #expect(usesIndex && !fullScan, "\(name): \(sql) → \(plan)")
                if sql.contains("group_name =") {
                    #expect(plan.contains("SEARCH countdowns"), "\(name) seeks straight to its group: \(plan)")
                }
                #expect(!plan.contains("USE TEMP B-TREE FOR ORDER BY"), "\(name) sorts through its index: \(plan)")
            }
        }
        }
    }
}
