import CountdownStoreCore

// The reads of items by key, on every engine that speaks SQL.
extension SQLTransaction {
    /// The items of `keys`, ``SQLStatements/keysPerStatement`` keys to a statement: whole chunks
    /// share one statement, only the last, shorter chunk needs its own. A transaction that locks
    /// rows reads them in key order, so that writers locking overlapping sets of keys take them in
    /// one order.
    package func items(keys: [String]) throws -> [ItemRecord] {
        let keys = locksRows ? keys.sorted() : keys
        let chunkSize = SQLStatements.keysPerStatement
        var found: [ItemRecord] = []
        for start in stride(from: 0, to: keys.count, by: chunkSize) {
            let chunk = keys[start..<min(start + chunkSize, keys.count)]
            try run(statements.itemsByKey(chunk, ordered: locksRows, locking: locksRowsNow)) { row in
                found.append(try itemRecord(row))
            }
        }
        return found
    }
}
