import Foundation

// What only some engines do, each a protocol of its own beside ``StorageEngine``. The store looks
// them up once, when it opens (``EngineCapabilities``); an engine without one costs nothing.

/// An engine whose database has a clock of its own (a server's): the store's wall clock is that
/// clock, read in the same round trip as the clocks of each transaction.
package protocol DatabaseClockEngine: StorageEngine {
    /// `local` as the time model must see it outside a transaction: the engine's estimate of its
    /// database's clock now (see ``DatabaseClockReading/clockReading(_:)``).
    func clockReading(_ local: ClockReading) -> ClockReading
}

/// The transactions of a ``DatabaseClockEngine``.
package protocol DatabaseClockReading: RepositoryReading {
    /// `local`, a reading of this host's clock taken for this transaction, as the store's time
    /// model must see it: the database's clock in place of the system clock, read in the same
    /// round trip as ``RepositoryReading/clocks()``.
    func clockReading(_ local: ClockReading) throws -> ClockReading
    /// How far the database's clock (plus the calibration offset) is ahead of the store wall
    /// clock `wall`, at the instant of the last ``clockReading(_:)``.
    func databaseClockSkew(wall: Int64) -> Int64?
    /// The database's own clock (ms since 1970, no calibration) as this transaction read it
    /// with its clocks; `nil` when the engine counts on the host's clock instead.
    var databaseClockMs: Int64? { get }
}

/// An engine shared by hosts on several machines, whose writers run side by side: only the
/// writes that must move the checkpoint do (the holder's heartbeats, clock edits, suspending,
/// calibrating), taking the clock row's lock first, while every other write leaves the clock
/// row alone and never queues on it. (Without it, every write moves the checkpoint, and one
/// write group runs at a time.)
package protocol SideBySideWritingEngine: StorageEngine {
    /// The most writes one group commit takes into its transaction, each in a savepoint.
    var groupedWriteLimit: Int { get }
    /// How many group commits may run side by side, each on a connection of its own.
    var concurrentWriteGroups: Int { get }
}

/// The transactions of a ``SideBySideWritingEngine``, which lock what they read.
package protocol RowLockingTransaction: RepositoryReading {
    /// Locks the clock row until the transaction ends; called before the clocks are read by a
    /// write that moves the checkpoint or the lease, so that those writes take turns while the
    /// others run side by side.
    func lockClocks() throws
    /// Runs `body`, whose reads of items take no row locks even in a write transaction: for
    /// reads that only decide what to show, taken after other locks, where a lock would risk a
    /// deadlock.
    func withoutRowLocks<T>(_ body: () throws -> T) rethrows -> T
}

/// An engine whose database tells it of other connections' writes as they commit (a server's
/// notifications), so that the ticker need not wait for its next poll.
package protocol ChangeNoticeEngine: StorageEngine {
    /// Whether notices come on this store (an engine may be set to poll instead).
    var pushesForeignChanges: Bool { get }
    /// Calls `changed` whenever another connection's commit may matter (and whenever the engine
    /// may have missed one), until the task is cancelled; the ticker runs it beside its loop.
    func watchForeignChanges(clock: any StoreClock, _ changed: @escaping @Sendable () -> Void) async
}

/// Work an engine does in the background while a ticker runs (the embedded engine: folding its
/// write-ahead log back into the file when no deadline is near).
package protocol EngineUpkeep: AnyObject, Sendable {
    /// The ticker is about to sleep, and the next deadline is `gapMs` away (`nil`: none is due).
    func idle(untilNextDeadlineMs gapMs: Int64?)
    /// The ticker is between two batches of a backlog, about to record the next: returns when
    /// the next may go (at once, unless the engine needs the backlog to hold still briefly).
    func betweenBatches() async
    /// Stops, waiting for work under way.
    func stop() async
}

/// An engine with upkeep of its own while a ticker runs, and a way of its own of letting other
/// processes' writers in between the batches of a backlog.
package protocol UpkeepEngine: StorageEngine {
    /// Starts the engine's upkeep for a ticker that starts running; `nil` when there is none to
    /// do (the database is the host's to look after).
    func startUpkeep() throws -> (any EngineUpkeep)?
    /// Leaves the database to other processes' writers for `pause` (real time): this store's own
    /// writes wait meanwhile. Between the batches of a backlog.
    func leaveWritesToOthers(for pause: Duration) async
}

/// An engine whose waits a closing store may abandon: the operations still under way fail now,
/// for a store that closes without waiting any longer for a database that does not answer;
/// ``StorageEngine/close()`` follows once they have ended. (Engines whose every wait is bounded
/// need not be one.)
package protocol AbandonableEngine: StorageEngine {
    /// Makes the waits of the operations still under way give up now (they fail).
    func abandonWaits()
}

/// An engine with more to say in ``StoreDiagnostics`` than its migrations and integrity.
package protocol DetailedEngine: StorageEngine {
    /// What the engine adds to ``StoreDiagnostics`` (`clock`: this host's clock, to compare).
    func details(clock: any StoreClock) async throws -> [EngineDetail]
}

/// The capabilities of a store's engine, looked up once when the store opens.
struct EngineCapabilities: Sendable {
    let databaseClock: (any DatabaseClockEngine)?
    let sideBySide: (any SideBySideWritingEngine)?
    let changeNotices: (any ChangeNoticeEngine)?
    let upkeep: (any UpkeepEngine)?
    let abandonable: (any AbandonableEngine)?
    let detailed: (any DetailedEngine)?

    init(_ engine: any StorageEngine) {
        databaseClock = engine as? any DatabaseClockEngine
        sideBySide = engine as? any SideBySideWritingEngine
        changeNotices = engine as? any ChangeNoticeEngine
        upkeep = engine as? any UpkeepEngine
        abandonable = engine as? any AbandonableEngine
        detailed = engine as? any DetailedEngine
    }

    /// Whether writers run side by side (see ``SideBySideWritingEngine``).
    var writersRunSideBySide: Bool { sideBySide != nil }

    /// The most writes one group commit takes in: 256 where one writer goes at a time (a group's
    /// transaction stays short beside other processes, and no bigger than a bulk start's batches).
    var groupedWriteLimit: Int { sideBySide?.groupedWriteLimit ?? 256 }

    /// How many group commits run side by side: 1 where one writer goes at a time.
    var concurrentWriteGroups: Int { sideBySide?.concurrentWriteGroups ?? 1 }

    /// `local` as the time model must see it outside a transaction.
    func clockReading(_ local: ClockReading) -> ClockReading {
        databaseClock?.clockReading(local) ?? local
    }

    /// `local` as the time model must see it in transaction `tx`.
    func clockReading(_ local: ClockReading, in tx: any RepositoryReading) throws -> ClockReading {
        guard databaseClock != nil, let tx = tx as? any DatabaseClockReading else { return local }
        return try tx.clockReading(local)
    }

    /// The database clock's skew against `wall` in transaction `tx`; `nil` on this host's clock.
    func databaseClockSkew(wall: Int64, in tx: any RepositoryReading) -> Int64? {
        guard databaseClock != nil, let tx = tx as? any DatabaseClockReading else { return nil }
        return tx.databaseClockSkew(wall: wall)
    }

    /// The database's own clock as transaction `tx` read it; `nil` on this host's clock.
    func databaseClockMs(in tx: any RepositoryReading) -> Int64? {
        guard databaseClock != nil, let tx = tx as? any DatabaseClockReading else { return nil }
        return tx.databaseClockMs
    }

    /// Locks the clock row of transaction `tx` where writers run side by side.
    func lockClocks(in tx: any RepositoryReading) throws {
        guard sideBySide != nil, let tx = tx as? any RowLockingTransaction else { return }
        try tx.lockClocks()
    }

    /// Runs `body` without row locks in transaction `tx` (see ``RowLockingTransaction``).
    func withoutRowLocks<T>(in tx: any RepositoryReading, _ body: () throws -> T) rethrows -> T {
        guard sideBySide != nil, let tx = tx as? any RowLockingTransaction else { return try body() }
        return try tx.withoutRowLocks(body)
    }
}
