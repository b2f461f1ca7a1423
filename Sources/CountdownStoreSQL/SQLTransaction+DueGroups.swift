import CountdownStoreCore

// The reads that make expiry batches fair between groups, on every engine that speaks SQL: the
// groups of running countdowns, visited in group order by a skip scan of the index by group
// (one seek a group, however many countdowns each holds), and the oldest due countdowns of each
// of several groups.
extension SQLTransaction {
    package func runningGroups(after: String, limit: Int, dueBy: SoonestDeadlines) throws -> [(
        name: String, due: Bool
    )] {
        try all(statements.runningGroups(after: after, limit: limit, dueBy: dueBy)) { row in
            (try row.text(0), try row.int(1) != 0)
        }
    }

    package func dueForExpiry(policy: CountdownPolicy, dueBy deadline: Int64, groups: [String?], limit: Int)
        throws -> [ItemRecord]
    {
        var found: [ItemRecord] = []
        let named = groups.compactMap { $0 }
        if statements.dialect.engine == .postgres {
            // One statement for the named groups: a round trip costs more than a seek.
            for start in stride(from: 0, to: named.count, by: SQLStatements.groupsPerStatement) {
                let chunk = named[start..<min(start + SQLStatements.groupsPerStatement, named.count)]
                try run(
                    statements.dueInGroups(
                        policy: policy, dueBy: deadline, groups: chunk, limit: limit, locking: locksRowsNow)
                ) { found.append(try itemRecord($0)) }
            }
        } else {
            for group in named {
                try run(statements.dueInGroup(policy: policy, dueBy: deadline, group: group, limit: limit)) {
                    found.append(try itemRecord($0))
                }
            }
        }
        if groups.contains(where: { $0 == nil }) {
            try run(
                statements.dueInGroup(policy: policy, dueBy: deadline, group: nil, limit: limit, locking: locksRowsNow)
            ) { found.append(try itemRecord($0)) }
        }
        return found
    }
}
