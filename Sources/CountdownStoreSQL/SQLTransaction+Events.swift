import CountdownStoreCore

// The reads and the removal of events, on every engine that speaks SQL.
extension SQLTransaction {
    package func events(_ listing: EventListing, limit: Int) throws -> [EventRecord] {
        switch listing {
        case .after(let id):
            let horizon = try prepareEventReads(byID: true)
            if let horizon, horizon <= id { return [] }
            return try all(statements.events(after: id, through: horizon, limit: limit), eventRecord)
        case .recent(let kinds):
            _ = try prepareEventReads(byID: false)
            return try all(statements.recentEvents(kinds: kinds, limit: limit), eventRecord)
        case .recentOf(let key, let window):
            _ = try prepareEventReads(byID: false)
            return try all(statements.recentEvents(key: key, window: window, limit: limit), eventRecord)
        }
    }

    package func lastEventID() throws -> Int64 {
        try first(statements.lastEventID(through: try prepareEventReads(byID: true))) { try $0.int(0) } ?? 0
    }

    package func events(kinds: [String]?, group: String?, after id: Int64, through last: Int64?, limit: Int)
        throws -> (records: [EventRecord], readThrough: Int64)
    {
        let horizon = try prepareEventReads(byID: true)
        var upper = min(last ?? .max, horizon ?? .max)
        if upper == .max { upper = try lastEventID() }
        guard upper > id else { return ([], id) }
        guard kinds != nil || group != nil else {
            let records = try all(statements.events(after: id, through: upper, limit: limit), eventRecord)
            return (records, records.count == limit ? records.last?.id ?? upper : upper)
        }
        // One range of an index for each kind, merged by ID: what every kind has up to the first
        // range that was cut at `limit` is read in full.
        var found: [EventRecord] = []
        var cut = upper
        for kind in kinds ?? EventKind.allCases.map(\.rawValue) {
            let records = try all(
                statements.events(kind: kind, group: group, after: id, through: upper, limit: limit), eventRecord)
            if records.count == limit, let lastID = records.last?.id { cut = min(cut, lastID) }
            found += records
        }
        found = found.filter { ($0.id ?? 0) <= cut }.sorted { ($0.id ?? 0) < ($1.id ?? 0) }
        if found.count >= limit {
            found.removeSubrange(limit...)
            cut = found.last?.id ?? cut
        }
        return (found, cut)
    }

    package func deleteEvents(before cutoffMs: Int64, throughID: Int64, limit: Int) throws -> (
        deleted: Int, more: Bool
    ) {
        // Among the oldest `limit` events only: event IDs follow W, so once the oldest are not
        // old enough, none after them are, and no pass scans the rest of the table.
        let oldest = try all(statements.oldestEvents(through: throughID, limit: limit)) {
            (try $0.int(0), try $0.int(1))
        }
        let doomed = oldest.prefix { $0.1 < cutoffMs }
        guard let first = doomed.first, let last = doomed.last else { return (0, false) }
        let deleted = try run(statements.deleteEvents(from: first.0, through: last.0))
        return (deleted, doomed.count == limit)
    }
}
