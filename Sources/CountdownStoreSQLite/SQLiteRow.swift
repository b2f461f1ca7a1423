import CountdownStoreCore
import CSQLiteShim
import Foundation

/// The current row of a statement, read by column position. A NULL where a value is required
/// (a damaged row) throws instead of trapping.
struct SQLiteRow: RecordRow {
    let statement: OpaquePointer

    func isNull(_ column: Int) -> Bool {
        sqlite3_column_type(statement, Int32(column)) == SQLITE_NULL
    }

    func int(_ column: Int) throws -> Int64 {
        if isNull(column) { throw damaged(column) }
        return sqlite3_column_int64(statement, Int32(column))
    }

    func optionalInt(_ column: Int) -> Int64? {
        isNull(column) ? nil : sqlite3_column_int64(statement, Int32(column))
    }

    func bool(_ column: Int) throws -> Bool {
        try int(column) != 0
    }

    func text(_ column: Int) throws -> String {
        guard let text = optionalText(column) else { throw damaged(column) }
        return text
    }

    func optionalText(_ column: Int) -> String? {
        guard let bytes = sqlite3_column_text(statement, Int32(column)) else { return nil }
        let count = Int(sqlite3_column_bytes(statement, Int32(column)))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    /// TEXT as text, BLOB as bytes; numbers (only from outside writers) as their text.
    func payload(_ column: Int) -> CountdownPayload? {
        switch sqlite3_column_type(statement, Int32(column)) {
        case SQLITE_NULL:
            return nil
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(statement, Int32(column)))
            guard let bytes = sqlite3_column_blob(statement, Int32(column)), count > 0 else { return .bytes(Data()) }
            return .bytes(Data(bytes: bytes, count: count))
        default:
            return optionalText(column).map(CountdownPayload.text)
        }
    }

    private func damaged(_ column: Int) -> CountdownError {
        Self.damaged(
            column: sqlite3_column_name(statement, Int32(column)).map { String(cString: $0) } ?? "column \(column)")
    }
}
