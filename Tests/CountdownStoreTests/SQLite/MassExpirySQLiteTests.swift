import Foundation
import Testing

@testable import CountdownStoreCore

/// A mass expiry on SQLite, read from the statements it executes: each transaction records at most
/// a batch, the ticker's size, other writes a tenth of it, so that other writes go between the batches.
@Suite("Mass expiry on SQLite")
struct MassExpirySQLiteTests {
    @Test("Each transaction records at most a batch: the ticker's size, other writes a tenth of it")
    func transactionsStayShort() async throws {
        let traced = try QuerySQLiteTests.TracedStore(configure: { configuration in
            configuration.expiryBatchSize = 100
            configuration.retention = .keepEverything
        })
        let store = traced.store
        _ = try await MassExpiryTests.startSale(store, count: 1_000)
        traced.clock.advance(by: .seconds(12))
        let statements = try await traced.allStatements {
            try await store.start("beside", duration: .hours(1))  // another write: a tenth of a batch
            while try await store.expireDueBatch() > 0 {}
        }
        var perTransaction: [Int] = []
        var current = 0
        for statement in statements {
            if statement.hasPrefix("INSERT INTO countdown_events") {
                // One statement may insert many events: each row names its kind.
                current += statement.components(separatedBy: "'expired'").count - 1
            }
            if statement == "COMMIT" {
                perTransaction.append(current)
                current = 0
            }
        }
        #expect(perTransaction.first == 10, "the other write recorded a tenth of a batch: \(perTransaction.prefix(3))")
        #expect(perTransaction.max() == 100 && perTransaction.reduce(0, +) == 1_000, "\(perTransaction)")
        try await store.close()
    }
}
