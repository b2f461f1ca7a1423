import CountdownStoreCore
import CountdownStoreSQL
import Foundation
import PostgresNIO

// The operations of the SQL contract (migration 0008) as this engine runs them: through the same
// functions of the store's schema that hosts in other languages call (`countdown_start_at` and
// the others, which `countdown_start` and its siblings call with the clocks of `countdown_now`),
// given this host's instant. One implementation of each operation on PostgreSQL.
extension PostgresTransaction: StoredOperations {
    /// `(r.item).column` for each column `ItemRecord(row:)` reads, then the payload's bytes.
    static let storedItemColumns =
        (ItemRecord.selectedColumns.split(separator: ",").map {
            "(r.item)." + $0.trimmingCharacters(in: .whitespacesAndNewlines)
        } + ["(r.item).payload_bytes"]).joined(separator: ", ")

    /// The instant's eight placeholders from `$1` on, as the schema's `countdown_instant`.
    private var instantArgument: String {
        "ROW($1::bigint, $2::bigint, $3::bigint, $4::boolean, $5::bigint, $6::bigint, $7::bigint, $8::bigint)::"
            + "\(schemaPrefix)countdown_instant"
    }

    private static func values(_ instant: OperationInstant) -> [SQLValue] {
        [
            .int(instant.wall), .int(instant.active), .int(instant.gap), .bool(instant.ticking),
            .int(instant.baseWall), .int(instant.baseFloor), .int(instant.baseActive), .int(instant.baseGap),
        ]
    }

    /// Calls `function` with the instant and `arguments` (placeholders from `$9` on) and reads
    /// its outcome, its item and the lateness of the expiry it recorded first. The events this
    /// transaction appended so far are inserted before: they come before the function's.
    private func runStored(
        _ function: String, _ arguments: String, _ instant: OperationInstant, _ values: [SQLValue]
    ) throws -> StoredOutcome {
        guard let outcome = try runStoredRows(function, arguments, instant, values).first else {
            throw CountdownError(.storageFailure, "\(function) returned no row")
        }
        return outcome
    }

    /// ``runStored(_:_:_:_:)`` for a function that returns a row for each item it took, in order.
    private func runStoredRows(
        _ function: String, _ arguments: String, _ instant: OperationInstant, _ values: [SQLValue],
        orderedBy order: String? = nil
    ) throws -> [StoredOutcome] {
        try flushEvents()
        let sql = storedSQL(function, arguments, orderedBy: order)
        return try storedOutcomes(run(sql, storedValues(instant, values)).rows)
    }

    /// The statement of an operation of the schema's own, its rows the columns of an item, then
    /// the outcome and the lateness of an expiry it recorded first.
    private func storedSQL(_ function: String, _ arguments: String, orderedBy order: String? = nil) -> String {
        "SELECT \(Self.storedItemColumns), r.outcome, r.late_ms FROM \(schemaPrefix)\(function)("
            + instantArgument + ", $9::integer, " + arguments + ") AS r" + (order.map { " ORDER BY " + $0 } ?? "")
    }

    private func storedValues(_ instant: OperationInstant, _ values: [SQLValue]) -> [SQLValue] {
        Self.values(instant) + [.int(Int64(engine.eventLockClass))] + values
    }

    /// The outcomes in `rows` of an operation of the schema's own.
    private func storedOutcomes<Rows: Sequence>(_ rows: Rows) throws -> [StoredOutcome]
    where Rows.Element == PostgresRow {
        try rows.map { row in
            let cells = PostgresRecordRow(row)
            let outcome = try cells.text(22)
            let lateMs = try cells.optionalInt(23)
            let item = try cells.isNull(0) ? nil : Self.item(row)
            if let item {
                // The lease holder, wherever it runs, wakes for a sooner deadline and for an expiry.
                noteDeadline(item)
                if lateMs != nil { wakeUp = "expired" }
            }
            return StoredOutcome(outcome: outcome, item: item, lateMs: lateMs)
        }
    }

    func start(
        key: String, durationMs: Int64?, group: String?, payload: CountdownPayload?, policy: CountdownPolicy,
        rule: CountdownRule?, maxWaitMs: Int64?, whenActive: String, at instant: OperationInstant
    ) throws -> StoredOutcome {
        try runStored(
            "countdown_start_at",
            "$10::text, $11::bigint, $12::text, $13::text, $14::bytea, $15::text, $16::text, $17::bigint, $18::text",
            instant,
            [.text(key), .int(durationMs), .text(group)] + Self.payloadValues(payload)
                + [.text(policy.rawValue), .text(rule?.rawValue), .int(maxWaitMs), .text(whenActive)])
    }

    func start(each items: [ItemRecord], at instant: OperationInstant) throws -> [StoredOutcome] {
        // 5,000 to a statement, two statements under way at once: the server inserts one while
        // this side writes the next one's JSON and reads the last one's rows.
        try flushEvents()
        try takeUnanswered()
        let sql = storedSQL("countdown_start_each_at", "$10::jsonb", orderedBy: "r.ordinal")
        var outcomes: [StoredOutcome] = []
        outcomes.reserveCapacity(items.count)
        var underWay: [EventLoopFuture<PostgresQueryResult>] = []
        var failure: (any Error)?
        // Every statement sent is waited for, a failure or not, before this returns.
        func takeOldest() throws {
            let future = underWay.removeFirst()
            do {
                let result = try TransactionThread.wait(for: future, on: connection, watch: watch)
                if failure == nil { outcomes += try storedOutcomes(result.rows) }
            } catch let error as WaitAbandoned {
                throw error
            } catch {
                if failure == nil { failure = error }
            }
        }
        for first in stride(from: 0, to: items.count, by: Self.startsPerStatement) {
            let chunk = items[first..<min(items.count, first + Self.startsPerStatement)]
            underWay.append(try send(sql, storedValues(instant, [.text(Self.startsJSON(chunk))])))
            if underWay.count >= 2 { try takeOldest() }
            if failure != nil { break }
        }
        while !underWay.isEmpty { try takeOldest() }
        if let failure { throw failure }
        return outcomes
    }

    /// How many starts one statement of a batch takes.
    static let startsPerStatement = 5_000

    /// The starts of a batch as `countdown_start_each_at` reads them: a JSON array of objects.
    static func startsJSON(_ items: ArraySlice<ItemRecord>) -> String {
        // The JSON written by hand: Foundation's serializer took longer than the server's insert.
        var json = "["
        json.reserveCapacity(items.count * 96)
        for (index, item) in items.enumerated() {
            if index > 0 { json += "," }
            json += "{\"key\":"
            Self.appendJSONString(item.key, to: &json)
            json += ",\"policy\":\"\(item.policy.rawValue)\""
            if let duration = item.durationMs { json += ",\"duration_ms\":\(duration)" }
            if let group = item.group {
                json += ",\"group\":"
                Self.appendJSONString(group, to: &json)
            }
            if let rule = item.rule { json += ",\"rule\":\"\(rule.rawValue)\"" }
            if let maxWait = item.maxWaitMs { json += ",\"max_wait_ms\":\(maxWait)" }
            switch item.payload {
            case .text(let text)?:
                json += ",\"payload\":"
                Self.appendJSONString(text, to: &json)
            case .bytes(let data)?: json += ",\"payload_base64\":\"\(data.base64EncodedString())\""
            case nil: break
            }
            json += "}"
        }
        json += "]"
        return json
    }

    /// `text` as a JSON string: quotes, backslashes and control characters escaped.
    static func appendJSONString(_ text: String, to json: inout String) {
        json += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": json += "\\\""
            case "\\": json += "\\\\"
            case _ where scalar.value < 0x20:
                json += "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count)
                    + String(scalar.value, radix: 16)
            default: json.unicodeScalars.append(scalar)
            }
        }
        json += "\""
    }

    func cancel(key: String, at instant: OperationInstant) throws -> StoredOutcome {
        try runStored("countdown_cancel_at", "$10::text", instant, [.text(key)])
    }

    func extend(key: String, byMs: Int64, at instant: OperationInstant) throws -> StoredOutcome {
        try runStored("countdown_extend_at", "$10::text, $11::bigint", instant, [.text(key), .int(byMs)])
    }

    func claim(
        consumer: String, claimant: String, maxEvents: Int, clockMs: Int64, timeoutMs: Int64, wallMs: Int64,
        kinds: [String]?, group: String?, key: String?
    ) throws -> [EventRecord] {
        try flushEvents()
        let sql = """
            SELECT \(EventRecord.selectedColumns), payload_bytes FROM \(schemaPrefix)countdown_claim_at(
                $1::text, $2::text, $3::integer, $4::bigint, $5::bigint, $6::bigint, $7::integer,
                string_to_array($8::text, ','), $9::text, $10::text)
            """
        let values: [SQLValue] = [
            .text(consumer), .text(claimant), .int(Int64(maxEvents)), .int(clockMs), .int(timeoutMs), .int(wallMs),
            .int(Int64(engine.eventLockClass)), .text(kinds?.joined(separator: ",")), .text(group), .text(key),
        ]
        return try run(sql, values).rows.map { try EventRecord(row: PostgresRecordRow($0).payloadBytes(at: 11)) }
    }

    func acknowledge(
        consumer: String, claimant: String, eventID: Int64, clockMs: Int64, timeoutMs: Int64, wallMs: Int64
    ) throws -> Bool {
        let sql =
            "SELECT \(schemaPrefix)countdown_ack_at($1::text, $2::text, $3::bigint, $4::bigint, $5::bigint, $6::bigint)"
        let values: [SQLValue] = [
            .text(consumer), .text(claimant), .int(eventID), .int(clockMs), .int(timeoutMs), .int(wallMs),
        ]
        return try run(sql, values).rows.first?.decode(Bool.self) ?? false
    }
}
