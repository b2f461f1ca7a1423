import CountdownStoreCore
import CountdownStoreSQL
import Foundation
import Logging
import PostgresNIO

/// One transaction's view of the tables on PostgreSQL: the same reads and writes as SQLite's,
/// each statement waited for on the engine's thread.
final class PostgresTransaction: RepositoryWriting, DatabaseClockReading, RowLockingTransaction, @unchecked Sendable {
    let engine: PostgresEngine
    let connection: PostgresConnection
    let writing: Bool
    /// When its statements stop being waited for.
    let watch: StatementWatch
    /// The server's clock and the checkpoint, as the last ``clocks()`` read them.
    var serverMs: Int64?
    /// The instant of the store's last event, read with the clocks: the latest W a write used.
    var lastEventAtMs: Int64?
    /// The lease as the last ``clocks()`` read it.
    var leaseRead: Lease?
    /// This host's boot clock right before the last ``clocks()`` statement was sent.
    var bootBeforeClocks: Int64?
    /// The server's clock at the instant of the last ``clockReading(_:)`` (uncorrected).
    var serverAtReading: Int64?
    var checkpointRead: Checkpoint?
    /// The soonest deadlines as the last ``clocks()`` read them.
    var soonestRead = SoonestDeadlines()
    var savepoints = 0
    /// What this write tells the other hosts when it commits (a NOTIFY payload), if anything:
    /// `deadline` when it moved a next deadline earlier, `expired` when it recorded an expiry.
    var wakeUp: String?
    /// Events appended and not inserted yet: they go in together at the end (see ``flushEvents()``).
    var pendingEvents: [EventRecord] = []
    /// How many times events were inserted: a savepoint rolled back after events appended before
    /// it were inserted inside it queues them again.
    var eventFlushes = 0
    /// Statements sent and not waited for (the BEGIN, a savepoint's SAVEPOINT and RELEASE, the
    /// last insert before the COMMIT): the connection runs them in order before the next one,
    /// whose wait takes their results first. No thread wakes up between them.
    var unanswered: [(result: EventLoopFuture<PostgresQueryResult>, isBegin: Bool)] = []

    init(engine: PostgresEngine, connection: PostgresConnection, writing: Bool, watch: StatementWatch) {
        self.engine = engine
        self.connection = connection
        self.writing = writing
        self.watch = watch
    }

    var schemaPrefix: String { engine.prefix }

    // MARK: Statements

    /// Runs `sql` binding `values`, and returns its rows and how many rows it changed.
    @discardableResult
    func run(_ sql: String, _ values: [SQLValue] = []) throws -> (rows: [PostgresRow], changed: Int) {
        let future = try send(sql, values)
        try takeUnanswered()
        let result = try TransactionThread.wait(for: future, on: connection, watch: watch)
        return (Array(result.rows), result.metadata.rows ?? 0)
    }

    /// Sends `sql` without waiting for its result: the next statement's wait (or
    /// ``takeUnanswered()``) takes it, and throws its failure.
    func sendUnanswered(_ sql: String, _ values: [SQLValue] = [], isBegin: Bool = false) throws {
        unanswered.append((try send(sql, values), isBegin))
    }

    /// Waits for the statements sent unanswered, in order; a failed BEGIN throws ``BeginFailed``.
    /// The first failure is thrown once every one of them has answered.
    func takeUnanswered() throws {
        guard !unanswered.isEmpty else { return }
        let sent = unanswered
        unanswered.removeAll()
        var failure: (any Error)?
        for (future, isBegin) in sent {
            do {
                _ = try TransactionThread.wait(for: future, on: connection, watch: watch)
            } catch let error as WaitAbandoned {
                throw error
            } catch {
                if failure == nil {
                    failure = isBegin ? BeginFailed(failure: PostgresFailure(error, place: engine.place)) : error
                }
            }
        }
        if let failure { throw failure }
    }

    func send(_ sql: String, _ values: [SQLValue]) throws -> EventLoopFuture<PostgresQueryResult> {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values {
            switch value {
            case .int(let number): bindings.append(number)
            case .text(let text): bindings.append(text)
            case .bytes(let data): try bindings.append(data)
            case .bool(let flag): bindings.append(flag)
            case .null: bindings.appendNull()
            }
        }
        return connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: engine.logger)
    }

    func execute(_ sql: String) throws {
        try run(sql)
    }

    // MARK: Decoding

    /// The columns an insert writes (the database numbers new rows), in ``itemValues(_:)``'s order.
    static let insertColumns = """
        key, group_name, kind, policy, state, duration_ms, generation, start_offset_ms, gap_at_start_ms, \
        started_at_ms, paused_ms, paused_at_ms, deadline_ms, final_elapsed_ms, ended_at_ms, expired_at_ms, \
        payload, payload_bytes, updated_at_ms, rule, max_wait_ms
        """
    /// The types of the columns an insert writes, in order.
    static let insertTypes =
        ["text", "text", "text", "text", "text"] + Array(repeating: "bigint", count: 11)
        + ["text", "bytea", "bigint", "text", "bigint"]

    /// The core's columns (``ItemRecord/selectedColumns``), then the bytes of a binary payload.
    var selectItems: String {
        "SELECT \(ItemRecord.selectedColumns), payload_bytes FROM \(schemaPrefix)countdowns"
    }

    static func item(_ row: PostgresRow) throws -> ItemRecord {
        try ItemRecord(row: PostgresRecordRow(row, payloadBytesColumn: 21))
    }

    static func payloadValues(_ payload: CountdownPayload?) -> [SQLValue] {
        switch payload {
        case .text(let text)?: [.text(text), .null]
        case .bytes(let data)?: [.null, .bytes(data)]
        case nil: [.null, .null]
        }
    }

    static func itemValues(_ item: ItemRecord) -> [SQLValue] {
        [
            .int(item.id), .text(item.key), .text(item.group), .text(item.kind.rawValue), .text(item.policy.rawValue),
            .text(item.state.rawValue), .int(item.durationMs), .int(item.generation), .int(item.startOffsetMs),
            .int(item.gapAtStartMs), .int(item.startedAtMs), .int(item.pausedMs), .int(item.pausedAtMs),
            .int(item.deadlineMs), .int(item.finalElapsedMs), .int(item.endedAtMs), .int(item.expiredAtMs),
        ] + payloadValues(item.payload) + [.int(item.updatedAtMs), .text(item.rule?.rawValue), .int(item.maxWaitMs)]
    }

    /// Off inside ``withoutRowLocks(_:)``.
    var lockingRows = true
    /// The event horizon computed before this transaction's BEGIN (read transactions that read events).
    var horizon: Int64?
}

// The statements written once for both engines (`CountdownStoreSQL`) run here.
extension PostgresTransaction: SQLTransaction {
    var statements: SQLStatements { engine.statements.shared }

    /// A write transaction locks what it reads of items it may change (see ``forUpdate``).
    var locksRows: Bool { writing }
    var locksRowsNow: Bool { writing && lockingRows }

    @discardableResult
    func run(_ statement: SQLStatement, row: (PostgresRecordRow) throws -> Void) throws -> Int {
        let result = try run(statement.sql, statement.arguments)
        for each in result.rows { try row(PostgresRecordRow(each)) }
        return result.changed
    }

    func itemRecord(_ row: PostgresRecordRow) throws -> ItemRecord {
        try ItemRecord(row: row.payloadBytes(at: 21))
    }

    func eventRecord(_ row: PostgresRecordRow) throws -> EventRecord {
        try EventRecord(row: row.payloadBytes(at: 11))
    }

    /// The events appended so far are inserted first; a read by ID goes no further than the
    /// event horizon (see ``eventHorizon()``).
    func prepareEventReads(byID: Bool) throws -> Int64? {
        try flushEvents()
        return byID ? try eventHorizon() : nil
    }

    /// Nothing to note: an insert looks a retired key's generation up in its own statement.
    func noteRetiredKeys(_ any: Bool?) {}
}
