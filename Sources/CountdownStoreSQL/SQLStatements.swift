import CountdownStoreCore

/// The statements both engines run, written once (as ``SQL``) and rendered for one engine's
/// dialect when the engine is made: a run pairs the rendered text with its arguments and builds
/// no text. The consumers, their claims, the retired keys, the reads and the removal of events,
/// and the reads of items by key.
package final class SQLStatements: Sendable {
    /// The dialect the statements are rendered in.
    package let dialect: SQLDialect

    /// The most keys one read of items by key binds (``itemsByKey(_:ordered:locking:)``).
    package static let keysPerStatement = 500

    // The texts, rendered once.
    private let consumerCursor: String
    private let consumerCursorLocking: String
    private let consumerClaims: String
    private let createConsumer: String
    private let advanceConsumer: String
    private let consumers: String
    private let saveClaim: String
    private let deleteClaims: String
    private let retiredGeneration: String
    private let deleteItem: String
    private let retireKey: String
    private let endedItems: String
    private let deleteEndedItems: String
    private let deleteRetiredKeys: String
    private let eventsAfter: String
    private let eventsAfterThrough: String
    private let eventsOfKind: String
    private let eventsOfGroupAndKind: String
    private let lastEventID: String
    private let lastEventIDThrough: String
    private let recentEvents: String
    private let recentEventsOfKey: String
    private let oldestEvents: String
    private let deleteEventRange: String
    /// `SELECT` of the events' columns (and, on PostgreSQL, the bytes of a binary payload).
    private let selectEvents: String
    /// `SELECT` of the items' columns (and, on PostgreSQL, the bytes of a binary payload).
    private let selectItems: String
    private let runningGroups: String
    /// Reads of items by key, by (ordered, locking), for one key and for a whole chunk.
    private let itemsByOneKey: [Bool: [Bool: String]]
    private let itemsByWholeChunk: [Bool: [Bool: String]]

    /// The statements in `dialect`.
    package init(_ dialect: SQLDialect) {
        self.dialect = dialect
        func render(_ sql: SQL) -> String { sql.rendered(for: dialect) }
        consumerCursor = render(Self.consumerCursor(locking: false))
        consumerCursorLocking = render(Self.consumerCursor(locking: true))
        consumerClaims = render(Self.consumerClaims)
        createConsumer = render(Self.createConsumer)
        advanceConsumer = render(Self.advanceConsumer)
        consumers = render(Self.consumers)
        saveClaim = render(Self.saveClaim)
        deleteClaims = render(Self.deleteClaims)
        retiredGeneration = render(Self.retiredGeneration)
        deleteItem = render(Self.deleteItem)
        retireKey = render(Self.retireKey)
        endedItems = render(Self.endedItems)
        deleteEndedItems = render(Self.deleteEndedItems)
        deleteRetiredKeys = render(Self.deleteRetiredKeys)
        eventsAfter = render(Self.eventsAfter(through: false))
        eventsAfterThrough = render(Self.eventsAfter(through: true))
        eventsOfKind = render(Self.eventsOfKind)
        eventsOfGroupAndKind = render(Self.eventsOfGroupAndKind)
        lastEventID = render(Self.lastEventID(through: false))
        lastEventIDThrough = render(Self.lastEventID(through: true))
        recentEvents = render(Self.recentEvents)
        recentEventsOfKey = render(Self.recentEventsOfKey)
        oldestEvents = render(Self.oldestEvents)
        deleteEventRange = render(Self.deleteEventRange)
        selectEvents = render(Self.selectEvents)
        let selectItems = render(Self.selectItems)
        self.selectItems = selectItems
        runningGroups = render(Self.runningGroups)
        func byKey(count: Int) -> [Bool: [Bool: String]] {
            Dictionary(
                uniqueKeysWithValues: [false, true].map { ordered in
                    (
                        ordered,
                        Dictionary(
                            uniqueKeysWithValues: [false, true].map { locking in
                                (
                                    locking,
                                    Self.itemsByKey(
                                        selectItems, count: count, ordered: ordered, locking: locking, dialect: dialect)
                                )
                            })
                    )
                })
        }
        itemsByOneKey = byKey(count: 1)
        itemsByWholeChunk = byKey(count: Self.keysPerStatement)
    }

    // MARK: Consumers and their claims

    /// A consumer's cursor (on PostgreSQL, `locking` it until the transaction ends).
    package func consumerCursor(_ name: String, locking: Bool) -> SQLStatement {
        SQLStatement(locking ? consumerCursorLocking : consumerCursor, [.text(name)])
    }

    /// A consumer's claims, by their first event: rows of `first_event_id, last_event_id,
    /// acked_through, claimant, claimed_until_ms`.
    package func consumerClaims(_ name: String) -> SQLStatement {
        SQLStatement(consumerClaims, [.text(name)])
    }

    /// A new consumer at `cursor`; nothing when it exists (hosts of a fleet open one side by side).
    package func createConsumer(_ name: String, cursor: Int64, at wallMs: Int64) -> SQLStatement {
        SQLStatement(createConsumer, [.text(name), .int(cursor), .int(wallMs)])
    }

    /// A consumer's cursor moved on to `id`, never back; the consumer is made if it is not there.
    package func advanceConsumer(_ name: String, to id: Int64, at wallMs: Int64) -> SQLStatement {
        SQLStatement(advanceConsumer, [.text(name), .int(id), .int(wallMs)])
    }

    /// Every consumer, by name: rows of `name, last_event_id, updated_at_ms`.
    package var allConsumers: SQLStatement {
        SQLStatement(consumers)
    }

    /// A claim, written over the one of its consumer and first event.
    package func save(_ claim: ConsumerClaim) -> SQLStatement {
        SQLStatement(
            saveClaim,
            [
                .text(claim.consumer), .int(claim.firstID), .int(claim.lastID), .int(claim.ackedThrough),
                .text(claim.claimant), .int(claim.claimedUntilMs),
            ])
    }

    /// A consumer's claims that end at `id` or before.
    package func deleteClaims(_ consumer: String, through id: Int64) -> SQLStatement {
        SQLStatement(deleteClaims, [.text(consumer), .int(id)])
    }

    private static func consumerCursor(locking: Bool) -> SQL {
        "SELECT last_event_id FROM \(table: "countdown_consumers") WHERE name = \(arg: 1)"
            + (locking ? "\(postgres: " FOR UPDATE")" : "")
    }

    private static let consumerClaims: SQL = """
        SELECT first_event_id, last_event_id, acked_through, claimant, claimed_until_ms
        FROM \(table: "countdown_consumer_claims") WHERE consumer = \(arg: 1) ORDER BY first_event_id
        """

    private static let createConsumer: SQL = """
        INSERT INTO \(table: "countdown_consumers") (name, last_event_id, updated_at_ms) \
        VALUES (\(arg: 1), \(arg: 2), \(arg: 3)) ON CONFLICT (name) DO NOTHING
        """

    private static let advanceConsumer: SQL = """
        INSERT INTO \(table: "countdown_consumers") (name, last_event_id, updated_at_ms) \
        VALUES (\(arg: 1), \(arg: 2), \(arg: 3))
        ON CONFLICT (name) DO UPDATE SET last_event_id = \(SQL.greatest)(countdown_consumers.last_event_id, \(arg: 2)),
            updated_at_ms = \(arg: 3)
        """

    private static let consumers: SQL =
        "SELECT name, last_event_id, updated_at_ms FROM \(table: "countdown_consumers") ORDER BY name"

    private static let saveClaim: SQL = """
        \(sqlite: "INSERT OR REPLACE", postgres: "INSERT") INTO \(table: "countdown_consumer_claims")
            (consumer, first_event_id, last_event_id, acked_through, claimant, claimed_until_ms)
        VALUES (\(arg: 1), \(arg: 2), \(arg: 3), \(arg: 4), \(arg: 5), \(arg: 6))\
        \(postgres: SQLStatements.claimConflict)
        """

    /// PostgreSQL's spelling of SQLite's `OR REPLACE` for a claim.
    private static let claimConflict: SQL = """

        ON CONFLICT (consumer, first_event_id) DO UPDATE SET last_event_id = \(arg: 3), acked_through = \(arg: 4),
            claimant = \(arg: 5), claimed_until_ms = \(arg: 6)
        """

    private static let deleteClaims: SQL =
        "DELETE FROM \(table: "countdown_consumer_claims") WHERE consumer = \(arg: 1) AND last_event_id <= \(arg: 2)"

    // MARK: Retired keys

    /// The last generation of a removed key: rows of `generation`.
    package func retiredGeneration(key: String) -> SQLStatement {
        SQLStatement(retiredGeneration, [.text(key)])
    }

    /// The removal of an item's row (``retireKey(of:)`` keeps its generation).
    package func delete(_ item: ItemRecord) -> SQLStatement {
        SQLStatement(deleteItem, [.int(item.id)])
    }

    /// A removed item's key with its last generation, so that the key's next life goes on from it.
    package func retireKey(of item: ItemRecord) -> SQLStatement {
        SQLStatement(retireKey, [.text(item.key), .int(item.generation), .int(item.updatedAtMs)])
    }

    /// The IDs of the `limit` items that ended first, before `cutoffMs`: rows of `id`. On
    /// PostgreSQL, ``deleteEndedItems(endedBefore:at:limit:)`` does all in one statement.
    package func endedItems(endedBefore cutoffMs: Int64, limit: Int) -> SQLStatement {
        SQLStatement(endedItems, [.int(cutoffMs), .int(Int64(limit))])
    }

    /// The keys of the items `ids` retired at `nowMs` (their last generations kept), written for this run.
    package func retireKeys(ofItems ids: [Int64], at nowMs: Int64) -> SQLStatement {
        let sql: SQL = """
            INSERT INTO \(table: "countdown_retired_keys") (key, generation, removed_at_ms)
            SELECT key, generation, \(arg: 1) FROM \(table: "countdowns") WHERE id IN (\(raw: Self.list(ids)))
            \(SQLStatements.onRetiredKeyConflict)
            """
        return SQLStatement(sql.rendered(for: dialect), [.int(nowMs)], reused: false)
    }

    /// The removal of the items `ids`, written for this run.
    package func deleteItems(_ ids: [Int64]) -> SQLStatement {
        let sql: SQL = "DELETE FROM \(table: "countdowns") WHERE id IN (\(raw: Self.list(ids)))"
        return SQLStatement(sql.rendered(for: dialect), reused: false)
    }

    /// PostgreSQL's removal of the `limit` items that ended first, before `cutoffMs`, their keys
    /// retired at `nowMs`, in one statement; rows another writer holds are left to the next batch.
    package func deleteEndedItems(endedBefore cutoffMs: Int64, at nowMs: Int64, limit: Int) -> SQLStatement {
        SQLStatement(deleteEndedItems, [.int(cutoffMs), .int(Int64(limit)), .int(nowMs)])
    }

    /// The removal of up to `limit` retired keys removed before `cutoffMs` and before the oldest
    /// event (an event of a key's last life keeps the key's generation).
    package func deleteRetiredKeys(removedBefore cutoffMs: Int64, limit: Int) -> SQLStatement {
        SQLStatement(deleteRetiredKeys, [.int(cutoffMs), .int(Int64(limit))])
    }

    private static let retiredGeneration: SQL =
        "SELECT generation FROM \(table: "countdown_retired_keys") WHERE key = \(arg: 1)"

    private static let deleteItem: SQL = "DELETE FROM \(table: "countdowns") WHERE id = \(arg: 1)"

    private static let retireKey: SQL = """
        INSERT INTO \(table: "countdown_retired_keys") (key, generation, removed_at_ms) \
        VALUES (\(arg: 1), \(arg: 2), \(arg: 3))
        ON CONFLICT (key) DO UPDATE SET generation = \(SQL.greatest)(countdown_retired_keys.generation, \(arg: 2)),
            removed_at_ms = \(arg: 3)
        """

    /// A retired key's upsert: its generation never goes back.
    private static let onRetiredKeyConflict: SQL = """
        ON CONFLICT (key) DO UPDATE SET
            generation = \(SQL.greatest)(countdown_retired_keys.generation, excluded.generation),
            removed_at_ms = excluded.removed_at_ms
        """

    /// The batch of ended items, oldest first (SQLite by the index on the end instant of ended
    /// items; PostgreSQL skips the rows another writer holds).
    private static let endedItems: SQL = """
        SELECT id FROM \(table: "countdowns")\(sqlite: " INDEXED BY countdowns_ended_by_time")
        WHERE state IN ('expired', 'cancelled') AND ended_at_ms < \(arg: 1) ORDER BY ended_at_ms LIMIT \(arg: 2)\
        \(postgres: " FOR UPDATE SKIP LOCKED")
        """

    private static let deleteEndedItems: SQL = """
        WITH doomed AS (
            DELETE FROM \(table: "countdowns") WHERE id IN (
                \(SQLStatements.endedItems))
            RETURNING key, generation)
        INSERT INTO \(table: "countdown_retired_keys") (key, generation, removed_at_ms)
        SELECT key, generation, \(arg: 3) FROM doomed
        \(SQLStatements.onRetiredKeyConflict)
        """

    private static let deleteRetiredKeys: SQL = """
        DELETE FROM \(table: "countdown_retired_keys") WHERE \(sqlite: "rowid", postgres: "key") IN (
            SELECT \(sqlite: "rowid", postgres: "key") FROM \(table: "countdown_retired_keys")\
        \(sqlite: " INDEXED BY countdown_retired_keys_by_time")
            WHERE removed_at_ms < \(SQL.least)(
                \(arg: 1), coalesce((SELECT at_ms FROM \(table: "countdown_events") ORDER BY id LIMIT 1), \(arg: 1)))
            ORDER BY removed_at_ms LIMIT \(arg: 2)\(postgres: " FOR UPDATE SKIP LOCKED"))
        """

    /// `ids` written out: integers only.
    private static func list(_ ids: [Int64]) -> String {
        ids.map(String.init).joined(separator: ",")
    }

    // MARK: Events

    /// The events after `id`, by ID, up to `horizon` when there is one (see the engine's event horizon).
    package func events(after id: Int64, through horizon: Int64?, limit: Int) -> SQLStatement {
        guard let horizon else { return SQLStatement(eventsAfter, [.int(id), .int(Int64(limit))]) }
        return SQLStatement(eventsAfterThrough, [.int(id), .int(Int64(limit)), .int(horizon)])
    }

    /// The events of `kind` (and of `group` when given) after `id` and up to `last`, by ID, at
    /// most `limit`: a range of the index by kind, or by group and kind.
    package func events(kind: String, group: String?, after id: Int64, through last: Int64, limit: Int)
        -> SQLStatement
    {
        guard let group else {
            return SQLStatement(eventsOfKind, [.text(kind), .int(id), .int(last), .int(Int64(limit))])
        }
        return SQLStatement(eventsOfGroupAndKind, [.text(group), .text(kind), .int(id), .int(last), .int(Int64(limit))])
    }

    /// The last event ID (0 before the first), up to `horizon` when there is one: rows of one integer.
    package func lastEventID(through horizon: Int64?) -> SQLStatement {
        guard let horizon else { return SQLStatement(lastEventID) }
        return SQLStatement(lastEventIDThrough, [.int(horizon)])
    }

    /// The last `limit` events, latest first; only those of `kinds` when there are kinds (a text
    /// written for the number of kinds).
    package func recentEvents(kinds: [String]?, limit: Int) -> SQLStatement {
        guard let kinds else { return SQLStatement(recentEvents, [.int(Int64(limit))]) }
        let sql =
            selectEvents + " WHERE kind IN (\(dialect.placeholders(count: kinds.count))) ORDER BY id DESC LIMIT "
            + dialect.placeholder(kinds.count + 1, numbered: false)
        return SQLStatement(sql, kinds.map { .text($0) } + [.int(Int64(limit))])
    }

    /// The last `limit` events of `key` among the last `window` events, latest first.
    package func recentEvents(key: String, window: Int, limit: Int) -> SQLStatement {
        SQLStatement(recentEventsOfKey, [.int(Int64(window)), .text(key), .int(Int64(limit))])
    }

    /// The first `limit` events up to `id`, by ID: rows of `id, at_ms`.
    package func oldestEvents(through id: Int64, limit: Int) -> SQLStatement {
        SQLStatement(oldestEvents, [.int(id), .int(Int64(limit))])
    }

    /// The removal of the events from `first` to `last`.
    package func deleteEvents(from first: Int64, through last: Int64) -> SQLStatement {
        SQLStatement(deleteEventRange, [.int(first), .int(last)])
    }

    /// The core's columns (``EventRecord/selectedColumns``), then, on PostgreSQL, the bytes of a
    /// binary payload.
    private static let eventColumns: SQL = "\(raw: EventRecord.selectedColumns)\(postgres: ", payload_bytes")"

    private static let selectEvents: SQL = "SELECT \(SQLStatements.eventColumns) FROM \(table: "countdown_events")"

    private static func eventsAfter(through: Bool) -> SQL {
        "\(SQLStatements.selectEvents) WHERE id > \(arg: 1)" + (through ? " AND id <= \(arg: 3)" : "")
            + " ORDER BY id LIMIT \(arg: 2)"
    }

    private static let eventsOfKind: SQL = """
        SELECT \(SQLStatements.eventColumns) FROM \(table: "countdown_events")\
        \(sqlite: " INDEXED BY countdown_events_by_kind")
        WHERE kind = \(arg: 1) AND id > \(arg: 2) AND id <= \(arg: 3) ORDER BY id LIMIT \(arg: 4)
        """

    private static let eventsOfGroupAndKind: SQL = """
        SELECT \(SQLStatements.eventColumns) FROM \(table: "countdown_events")\
        \(sqlite: " INDEXED BY countdown_events_by_group")
        WHERE group_name = \(arg: 1) AND kind = \(arg: 2) AND id > \(arg: 3) AND id <= \(arg: 4)
        ORDER BY id LIMIT \(arg: 5)
        """

    private static func lastEventID(through: Bool) -> SQL {
        "SELECT coalesce(max(id), 0) FROM \(table: "countdown_events")" + (through ? " WHERE id <= \(arg: 1)" : "")
    }

    private static let recentEvents: SQL = "\(SQLStatements.selectEvents) ORDER BY id DESC LIMIT \(arg: 1)"

    private static let recentEventsOfKey: SQL = """
        SELECT \(SQLStatements.eventColumns) FROM \
        (SELECT * FROM \(table: "countdown_events") ORDER BY id DESC LIMIT \(arg: 1)) \
        AS recent WHERE key = \(arg: 2) ORDER BY id DESC LIMIT \(arg: 3)
        """

    private static let oldestEvents: SQL =
        "SELECT id, at_ms FROM \(table: "countdown_events") WHERE id <= \(arg: 1) ORDER BY id LIMIT \(arg: 2)"

    private static let deleteEventRange: SQL =
        "DELETE FROM \(table: "countdown_events") WHERE id >= \(arg: 1) AND id <= \(arg: 2)"

    // MARK: Due countdowns by group

    /// The most groups one read of due countdowns by group binds (PostgreSQL).
    package static let groupsPerStatement = 64

    /// The groups of running countdowns after `after` (`""`: from the first), in group order, at
    /// most `limit`: rows of `group_name, due`, `due` 1 when one of the group's countdowns is due
    /// by `dueBy`. A skip scan of the index by group: one seek a group, and one a group for its
    /// soonest deadline on each timeline. (The soonest deadline is read in the index's order and
    /// compared after: asked whether any is due by a bound it does not know, PostgreSQL's generic
    /// plan scanned the whole table for each group with none due.)
    package func runningGroups(after: String, limit: Int, dueBy: SoonestDeadlines) -> SQLStatement {
        SQLStatement(
            runningGroups,
            [
                .text(after), .int(Int64(limit)), .int(dueBy.wall ?? Int64.min),
                .int(dueBy.active ?? Int64.min),
            ])
    }

    /// The running countdowns of `policy` of `group` (`nil`: of no group) due by `deadline`, the
    /// oldest first, at most `limit`; on PostgreSQL, `locking` them and skipping those another
    /// writer holds.
    package func dueInGroup(
        policy: CountdownPolicy, dueBy deadline: Int64, group: String?, limit: Int, locking: Bool = false
    ) -> SQLStatement {
        let sql: SQL =
            "\(raw: selectItems)\(sqlite: " INDEXED BY countdowns_running_by_group")"
            + " WHERE state = 'running' AND deadline_ms IS NOT NULL AND "
            + (group == nil ? "group_name IS NULL" : "group_name = ")
        var arguments: [SQLValue] = []
        var text = sql.rendered(for: dialect)
        if let group {
            arguments.append(.text(group))
            text += dialect.placeholder(1, numbered: true)
        }
        let next = arguments.count + 1
        text +=
            " AND policy = \(dialect.placeholder(next, numbered: true))"
            + " AND deadline_ms <= \(dialect.placeholder(next + 1, numbered: true))"
            + " ORDER BY deadline_ms, key LIMIT \(dialect.placeholder(next + 2, numbered: true))"
            + (locking && dialect.engine == .postgres ? " FOR UPDATE SKIP LOCKED" : "")
        arguments += [.text(policy.rawValue), .int(deadline), .int(Int64(limit))]
        return SQLStatement(text, arguments)
    }

    /// PostgreSQL: the running countdowns of `policy` due by `deadline` in each of `groups`, the
    /// oldest first in each, at most `limit` of each, in one statement; `locking` them and
    /// skipping those another writer holds.
    package func dueInGroups(
        policy: CountdownPolicy, dueBy deadline: Int64, groups: ArraySlice<String>, limit: Int, locking: Bool
    ) -> SQLStatement {
        let names = (0..<groups.count).map { "(\(dialect.placeholder($0 + 4, numbered: true))::text)" }
        let text =
            "SELECT c.* FROM (VALUES \(names.joined(separator: ", "))) AS g(name) CROSS JOIN LATERAL ("
            + selectItems
            + " WHERE state = 'running' AND deadline_ms IS NOT NULL AND group_name = g.name AND policy = $1"
            + " AND deadline_ms <= $2 ORDER BY deadline_ms, key LIMIT $3"
            + (locking ? " FOR UPDATE SKIP LOCKED" : "") + ") AS c"
        return SQLStatement(
            text, [.text(policy.rawValue), .int(deadline), .int(Int64(limit))] + groups.map { .text($0) },
            reused: groups.count == Self.groupsPerStatement)
    }

    /// The skip scan of ``runningGroups(after:limit:dueBy:)``.
    private static let runningGroups: SQL = """
        WITH RECURSIVE visited(name, n) AS (
            SELECT (SELECT group_name FROM \(table: "countdowns")\(sqlite: " INDEXED BY countdowns_running_by_group")
                    WHERE state = 'running' AND deadline_ms IS NOT NULL AND group_name > \(arg: 1, as: "text")
                    ORDER BY group_name LIMIT 1), 1
            UNION ALL
            SELECT (SELECT c.group_name FROM \(table: "countdowns") AS c\
        \(sqlite: " INDEXED BY countdowns_running_by_group")
                    WHERE c.state = 'running' AND c.deadline_ms IS NOT NULL AND c.group_name > v.name
                    ORDER BY c.group_name LIMIT 1), v.n + 1
            FROM visited AS v WHERE v.name IS NOT NULL AND v.n < \(arg: 2, as: "bigint"))
        SELECT name, CASE WHEN (
                SELECT d.deadline_ms FROM \(table: "countdowns") AS d\
        \(sqlite: " INDEXED BY countdowns_running_by_group")
                WHERE d.state = 'running' AND d.deadline_ms IS NOT NULL AND d.group_name = visited.name
                    AND d.policy = 'wall' ORDER BY d.deadline_ms LIMIT 1) <= \(arg: 3, as: "bigint")
            OR (
                SELECT d.deadline_ms FROM \(table: "countdowns") AS d\
        \(sqlite: " INDEXED BY countdowns_running_by_group")
                WHERE d.state = 'running' AND d.deadline_ms IS NOT NULL AND d.group_name = visited.name
                    AND d.policy = 'active' ORDER BY d.deadline_ms LIMIT 1) <= \(arg: 4, as: "bigint")
            THEN 1 ELSE 0 END
        FROM visited WHERE name IS NOT NULL
        """

    // MARK: Items by key

    /// The items of `keys` (at most ``keysPerStatement``), in key order if `ordered`, their rows
    /// locked on PostgreSQL if `locking`. The texts of one key and of a whole chunk are rendered
    /// once; a shorter chunk's is written for its run.
    package func itemsByKey(_ keys: ArraySlice<String>, ordered: Bool, locking: Bool) -> SQLStatement {
        let sql =
            switch keys.count {
            case 1: itemsByOneKey[ordered]![locking]!
            case Self.keysPerStatement: itemsByWholeChunk[ordered]![locking]!
            default:
                Self.itemsByKey(selectItems, count: keys.count, ordered: ordered, locking: locking, dialect: dialect)
            }
        return SQLStatement(sql, keys.map { .text($0) })
    }

    /// The core's columns (``ItemRecord/selectedColumns``), then, on PostgreSQL, the bytes of a
    /// binary payload.
    private static let selectItems: SQL =
        "SELECT \(raw: ItemRecord.selectedColumns)\(postgres: ", payload_bytes") FROM \(table: "countdowns")"

    private static func itemsByKey(_ select: String, count: Int, ordered: Bool, locking: Bool, dialect: SQLDialect)
        -> String
    {
        select + " WHERE key IN (\(dialect.placeholders(count: count)))" + (ordered ? " ORDER BY key" : "")
            + (locking && dialect.engine == .postgres ? " FOR UPDATE" : "")
    }
}
