import Foundation

/// The rule for a new store's first `countdown_clock` row, the same on every engine; the engine
/// runs it in the transaction that finishes creating the store, under its write lock.
///
/// Another process opening the same new database at the same moment may have written the row
/// first; a process killed after the migrations committed may have left a store with no clock
/// row and nothing else: both are a store still being created, whose clocks start now. A store
/// that holds countdowns or events without its clock row is damaged, and is not written to.
package enum FirstClockRow {
    /// Writes the first clock row at `reading` unless the store has one; whether it wrote it.
    ///
    /// - Parameter place: where the database is, for the message (quoted), or `nil`.
    /// - Throws: ``CountdownError/Code/unreadableDatabase`` for a store with countdowns or
    ///   events and no clock row.
    package static func write(
        _ tx: any RepositoryWriting, place: String?, reading: () throws -> ClockReading
    ) throws -> Bool {
        if try tx.checkpoint() != nil { return false }
        guard try !tx.holdsItemsOrEvents() else {
            throw CountdownError(
                .unreadableDatabase,
                "the database\(place.map { " at \($0)" } ?? "") is damaged: its countdown_clock row is missing; "
                    + "it was left untouched"
            )
        }
        try tx.save(Checkpoint.initial(at: try reading()), creating: true)
        return true
    }
}
