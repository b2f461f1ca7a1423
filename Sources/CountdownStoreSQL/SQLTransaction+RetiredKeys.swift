import CountdownStoreCore

// The retired keys (a removed key's last generation, so that its next life goes on from it) and
// the removal of ended items, on every engine that speaks SQL.
extension SQLTransaction {
    package func retiredGeneration(key: String) throws -> Int64? {
        try first(statements.retiredGeneration(key: key)) { try $0.int(0) }
    }

    package func delete(_ item: ItemRecord) throws {
        noteRetiredKeys(true)
        try run(statements.delete(item))
        try run(statements.retireKey(of: item))
    }

    package func deleteItems(endedBefore cutoffMs: Int64, at nowMs: Int64, limit: Int) throws -> Int {
        switch statements.dialect.engine {
        case .postgres:
            // One statement: the batch deleted, its keys retired.
            return try run(statements.deleteEndedItems(endedBefore: cutoffMs, at: nowMs, limit: limit))
        case .sqlite:
            // No DELETE inside a WITH: the batch's IDs first, then its keys retired and its rows deleted.
            let ids = try all(statements.endedItems(endedBefore: cutoffMs, limit: limit)) { try $0.int(0) }
            guard !ids.isEmpty else { return 0 }
            try run(statements.retireKeys(ofItems: ids, at: nowMs))
            noteRetiredKeys(true)
            return try run(statements.deleteItems(ids))
        }
    }

    package func deleteRetiredKeys(removedBefore cutoffMs: Int64, limit: Int) throws -> Int {
        let deleted = try run(statements.deleteRetiredKeys(removedBefore: cutoffMs, limit: limit))
        if deleted > 0 { noteRetiredKeys(nil) }
        return deleted
    }
}
