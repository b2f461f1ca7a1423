import CountdownStoreCore

/// The named steps of opening, writing, checkpointing and closing at which a reliability test may
/// stop its process dead, to prove that the next open recovers from a kill at each of them.
///
/// Nothing happens at a crash point unless a process installed a handler with
/// ``install(_:)``; the store's own code only names where it is.
@_spi(Testing)
public enum CrashPoints {
    /// A step of the store's life.
    public enum Point: String, Sendable, CaseIterable {
        /// A new database file exists, still empty; SQLite has written nothing yet.
        case fileCreated = "create.file"
        /// The connection is open and the file is in WAL mode; no migration has run.
        case connectionOpened = "create.opened"
        /// Inside a migration's transaction, its SQL run, before it commits.
        case migrationBeforeCommit = "migrate.before-commit"
        /// A migration has committed; the next has not begun.
        case migrationAfterCommit = "migrate.after-commit"
        /// Inside the transaction that writes a new store's first `countdown_clock` row, before it commits.
        case firstClockBeforeCommit = "clock.before-commit"
        /// A new store's first `countdown_clock` row has committed.
        case firstClockAfterCommit = "clock.after-commit"
        /// Inside an operation's transaction, its work done, before `COMMIT`.
        case commitBefore = "commit.before"
        /// An operation's `COMMIT` has returned; its caller has not heard of it yet.
        case commitAfter = "commit.after"
        /// The WAL checkpointer is about to copy the write-ahead log into the database file.
        case checkpointBefore = "checkpoint.before"
        /// The WAL checkpointer has copied the pages back.
        case checkpointAfter = "checkpoint.after"
        /// ``CountdownStore/close()`` has given up the lease and is about to checkpoint.
        case closeBeforeCheckpoint = "close.before-checkpoint"
        /// ``CountdownStore/close()`` has checkpointed and is about to close the connection.
        case closeAfterCheckpoint = "close.after-checkpoint"
        /// ``CountdownStore/close()`` has closed the connection.
        case closed = "close.closed"
    }

    private static let handler = Locked<(@Sendable (Point) -> Void)?>(nil)

    /// Calls `handler` at every crash point this process reaches from now on, on the thread
    /// that reaches it; `nil` removes it.
    public static func install(_ handler: (@Sendable (Point) -> Void)?) {
        self.handler.withLock { $0 = handler }
    }

    /// Marks that the store has reached `point`.
    static func reach(_ point: Point) {
        if let handler = handler.withLock({ $0 }) { handler(point) }
    }
}
