import Foundation

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

/// What the store needs of its database engine besides transactions: the signs of other
/// connections' writes, upkeep while a ticker runs, inspection, and closing. The store's logic
/// reaches the database through this protocol and ``CountdownRepository`` alone.
package protocol StorageEngine: CountdownRepository {
    /// A number that changes whenever another connection (another process) commits; the ticker
    /// polls it to notice writes it was not told about.
    func foreignChangeToken() async throws -> Int
    /// Whether the database tells this engine of other connections' writes as they commit
    /// (a server's notifications), so that ``watchForeignChanges(clock:_:)`` is worth running.
    var pushesForeignChanges: Bool { get }
    /// Calls `changed` whenever another connection's commit may matter (and whenever the engine
    /// may have missed one), until the task is cancelled; the ticker runs it beside its loop.
    func watchForeignChanges(clock: any StoreClock, _ changed: @escaping @Sendable () -> Void) async
    /// Starts the engine's upkeep for a ticker that starts running; `nil` when the engine has
    /// none (or the database is the host's to look after).
    func startUpkeep() throws -> (any EngineUpkeep)?
    /// The migrations the database records, in the order they were applied.
    func appliedMigrations() async throws -> [String]
    /// The migrations this build knows, in order.
    var knownMigrations: [String] { get }
    /// The engine's own integrity check: `["ok"]` when the database is sound. `quick`: a faster
    /// form where the engine has one.
    func integrityCheck(quick: Bool) async throws -> [String]
    /// Folds the write-ahead log into the database and truncates it; whether all of it was.
    func checkpointLog() async throws -> Bool
    /// Closes what the store opened itself, after folding its log in; leaves a host's database open.
    func close() throws
    /// Makes the waits of the operations still under way give up now (they fail), for a store
    /// that closes without waiting any longer for a database that does not answer; ``close()``
    /// follows once they have ended. Engines whose every wait is bounded do nothing.
    func abandonWaits()
    /// What the engine adds to ``StoreDiagnostics`` (`clock`: this host's clock, to compare).
    func details(clock: any StoreClock) async throws -> [EngineDetail]
    /// Whether only the writes that must move the checkpoint do (the holder's heartbeats, clock
    /// edits, suspending, calibrating), taking the clock row's lock first, while every other
    /// write leaves the clock row alone and never queues on it: engines shared by hosts on
    /// several machines, whose writers run side by side. Otherwise every write moves it.
    var writersRunSideBySide: Bool { get }
    /// `local` as the time model must see it outside a transaction: the engine's estimate of its
    /// database's clock now (see ``RepositoryReading/clockReading(_:)``).
    func clockReading(_ local: ClockReading) -> ClockReading
    /// Leaves the database to other processes' writers for `pause` (real time): this store's own
    /// writes wait meanwhile. Between the batches of a backlog.
    func leaveWritesToOthers(for pause: Duration) async
    /// The most writes one group commit takes into its transaction, each in a savepoint.
    var groupedWriteLimit: Int { get }
    /// How many group commits may run side by side: 1 where the database lets one writer in at a
    /// time anyway; more where each runs on a connection of its own.
    var concurrentWriteGroups: Int { get }
}

extension StorageEngine {
    package func leaveWritesToOthers(for pause: Duration) async {
        try? await Task.sleep(for: pause)
    }
    package var pushesForeignChanges: Bool { false }
    package func watchForeignChanges(clock: any StoreClock, _ changed: @escaping @Sendable () -> Void) async {}
    package func details(clock: any StoreClock) async throws -> [EngineDetail] { [] }
    package var writersRunSideBySide: Bool { false }
    /// 256: a group's transaction stays short beside other processes, and no bigger than a
    /// bulk start's batches.
    package var groupedWriteLimit: Int { 256 }
    /// 1: one writer at a time.
    package var concurrentWriteGroups: Int { 1 }
    package func clockReading(_ local: ClockReading) -> ClockReading { local }
    package func abandonWaits() {}
}
