import CountdownStoreCore

// The consumers and their claims, on every engine that speaks SQL.
extension SQLTransaction {
    /// A consumer's cursor; in a transaction that locks rows, the consumer's row stays locked
    /// until it ends (two hosts acknowledging take turns).
    package func consumerCursor(_ name: String) throws -> Int64? {
        try first(statements.consumerCursor(name, locking: locksRows)) { try $0.int(0) }
    }

    package func consumerClaims(_ name: String) throws -> [ConsumerClaim] {
        try all(statements.consumerClaims(name)) { row in
            ConsumerClaim(
                consumer: name, firstID: try row.int(0), lastID: try row.int(1), ackedThrough: try row.int(2),
                claimant: try row.text(3), claimedUntilMs: try row.int(4))
        }
    }

    package func consumers() throws -> [(name: String, cursor: Int64, updatedAtMs: Int64)] {
        try all(statements.allConsumers) { row in (try row.text(0), try row.int(1), try row.int(2)) }
    }

    package func createConsumer(_ name: String, cursor: Int64, at wallMs: Int64) throws {
        // Hosts of a fleet open one consumer side by side: the first creates it, the others keep it.
        try run(statements.createConsumer(name, cursor: cursor, at: wallMs))
    }

    package func advanceConsumer(_ name: String, to id: Int64, at wallMs: Int64) throws {
        try run(statements.advanceConsumer(name, to: id, at: wallMs))
    }

    package func save(_ claim: ConsumerClaim) throws {
        try run(statements.save(claim))
    }

    package func deleteClaims(_ consumer: String, through id: Int64) throws {
        try run(statements.deleteClaims(consumer, through: id))
    }
}
