import CountdownStoreCore
import CountdownStoreSQL
import Foundation
import PostgresNIO

/// A PostgreSQL result row read as the core reads rows (``RecordRow``). A payload is two
/// columns here: text in the core's `payload` column, bytes in `payload_bytes`, selected after
/// the core's columns (at `payloadBytesColumn`).
struct PostgresRecordRow: RecordRow {
    private let row: PostgresRandomAccessRow
    private let payloadBytesColumn: Int?

    init(_ row: PostgresRow, payloadBytesColumn: Int? = nil) {
        self.row = row.makeRandomAccess()
        self.payloadBytesColumn = payloadBytesColumn
    }

    /// The same row, the bytes of a binary payload at `payloadBytesColumn`.
    func payloadBytes(at payloadBytesColumn: Int) -> PostgresRecordRow {
        PostgresRecordRow(row, payloadBytesColumn: payloadBytesColumn)
    }

    private init(_ row: PostgresRandomAccessRow, payloadBytesColumn: Int?) {
        self.row = row
        self.payloadBytesColumn = payloadBytesColumn
    }

    func isNull(_ column: Int) throws -> Bool {
        row[column].bytes == nil
    }

    func int(_ column: Int) throws -> Int64 {
        guard let value = try optionalInt(column) else { throw Self.damaged(column: row[column].columnName) }
        return value
    }

    func optionalInt(_ column: Int) throws -> Int64? {
        try row[column].decode(Int64?.self)
    }

    func bool(_ column: Int) throws -> Bool {
        guard let value = try row[column].decode(Bool?.self) else { throw Self.damaged(column: row[column].columnName) }
        return value
    }

    func text(_ column: Int) throws -> String {
        guard let value = try optionalText(column) else { throw Self.damaged(column: row[column].columnName) }
        return value
    }

    func optionalText(_ column: Int) throws -> String? {
        try row[column].decode(String?.self)
    }

    func payload(_ column: Int) throws -> CountdownPayload? {
        if let text = try optionalText(column) { return .text(text) }
        guard let payloadBytesColumn else { return nil }
        return try row[payloadBytesColumn].decode(Data?.self).map(CountdownPayload.bytes)
    }
}
