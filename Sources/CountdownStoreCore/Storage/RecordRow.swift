import Foundation

/// A row of a query result as an engine reads it, column by column from 0: the one thing an engine
/// supplies so that the records (``ItemRecord``, ``EventRecord``, ``Checkpoint``, ``Lease``) are
/// decoded once, in the core, the same way on every engine.
///
/// The decoders read columns by position, in the order the SQL layer's `selectedColumns` lists
/// them (an engine without SQL hands its values in that order). They are `@inlinable`, so that
/// an engine may specialize them for its row type: without it, "100 soonest" took 1.27–1.33×
/// raw instead of 1.12–1.13×.
package protocol RecordRow {
    /// Whether the column holds NULL.
    func isNull(_ column: Int) throws -> Bool
    /// An integer that must be there; NULL is a damaged database.
    func int(_ column: Int) throws -> Int64
    /// An integer or NULL.
    func optionalInt(_ column: Int) throws -> Int64?
    /// A boolean that must be there (an integer on engines without booleans).
    func bool(_ column: Int) throws -> Bool
    /// Text that must be there; NULL is a damaged database.
    func text(_ column: Int) throws -> String
    /// Text or NULL.
    func optionalText(_ column: Int) throws -> String?
    /// A payload, text or bytes, or NULL; an engine may store the two kinds in two columns.
    func payload(_ column: Int) throws -> CountdownPayload?
}

extension RecordRow {
    package func bool(_ column: Int) throws -> Bool { try int(column) != 0 }

    /// The value of an enumeration column, or an error that names the column and the bad value.
    @inlinable @inline(__always)
    package func value<T: RawRepresentable<String>>(_ column: Int, as: T.Type, named name: String, in table: String)
        throws -> T
    {
        let raw = try text(column)
        guard let value = T(rawValue: raw) else {
            throw CountdownError(.unreadableDatabase, "unexpected \(name) \(quoted(raw)) in the \(table) table")
        }
        return value
    }

    /// The error for NULL in a column the schema requires.
    package static func damaged(column name: String) -> CountdownError {
        CountdownError(.unreadableDatabase, "the database is damaged: NULL in the required column \(name)")
    }
}

extension ItemRecord {

    /// Decodes a row of the columns `selectedColumns` lists.
    @inlinable @inline(__always)
    package init(row: some RecordRow) throws {
        self.init(
            id: try row.int(0), key: try row.text(1), group: try row.optionalText(2),
            kind: try row.value(3, as: CountdownKind.self, named: "kind", in: "countdowns"),
            policy: try row.value(4, as: CountdownPolicy.self, named: "policy", in: "countdowns"),
            state: try row.value(5, as: CountdownState.self, named: "state", in: "countdowns"),
            durationMs: try row.optionalInt(6), generation: try row.int(7), startOffsetMs: try row.int(8),
            gapAtStartMs: try row.int(9), startedAtMs: try row.int(10), pausedMs: try row.int(11),
            pausedAtMs: try row.optionalInt(12), deadlineMs: try row.optionalInt(13),
            finalElapsedMs: try row.optionalInt(14), endedAtMs: try row.optionalInt(15),
            expiredAtMs: try row.optionalInt(16), payload: try row.payload(17), updatedAtMs: try row.int(18),
            rule: try row.isNull(19) ? nil : row.value(19, as: CountdownRule.self, named: "rule", in: "countdowns"),
            maxWaitMs: try row.optionalInt(20))
    }
}

extension EventRecord {

    /// Decodes a row of the columns `selectedColumns` lists.
    @inlinable @inline(__always)
    package init(row: some RecordRow) throws {
        self.init(.started, at: StoreTime(wall: try row.int(5), active: 0, gap: 0))
        id = try row.int(0)
        kind = try row.text(1)
        key = try row.optionalText(2)
        group = try row.optionalText(3)
        generation = try row.optionalInt(4)
        deadlineAtMs = try row.optionalInt(6)
        firedAtMs = try row.optionalInt(7)
        lateMs = try row.optionalInt(8)
        payload = try row.payload(9)
        detail = try row.optionalText(10)
    }
}

extension Checkpoint {

    /// Decodes the columns `selectedColumns` lists from a row, starting at `column`.
    @inlinable @inline(__always)
    package init(row: some RecordRow, from column: Int = 0) throws {
        self.init(
            createdAt: try row.int(column), active: try row.int(column + 1), gap: try row.int(column + 2),
            heartbeatAt: try row.int(column + 3), heartbeatBoot: try row.int(column + 4),
            bootID: try row.optionalText(column + 5), wallFloor: try row.int(column + 6),
            suspended: try row.bool(column + 7), calibrationOffset: try row.int(column + 8),
            calibratedAt: try row.optionalInt(column + 9), clockSkew: try row.int(column + 10))
    }
}

extension Lease {

    /// Decodes the columns `selectedColumns` lists from a row, starting at `column`; a missing row (NULLs from an
    /// outer join) is a lease nobody holds.
    @inlinable @inline(__always)
    package init(row: some RecordRow, from column: Int = 0) throws {
        if try row.isNull(column + 2) {
            self.init(holder: nil, acquiredAtMs: nil, expiresAtMs: 0)
        } else {
            self.init(
                holder: try row.optionalText(column), acquiredAtMs: try row.optionalInt(column + 1),
                expiresAtMs: try row.int(column + 2))
        }
    }
}
