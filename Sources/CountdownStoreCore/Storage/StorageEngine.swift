import Foundation

/// What every engine implements: transactions (read, write, and reads of events by ID), the
/// sign of other connections' writes, migrations, the integrity check, and closing. The store's
/// logic reaches the database through this protocol, the transactions it hands out
/// (``RepositoryReading``, ``RepositoryWriting``), and the capabilities below, which it asks an
/// engine for only where it needs them.
///
/// What only some engines do is a capability of its own, looked up once when the store opens
/// (``EngineCapabilities``): a database with a clock of its own (``DatabaseClockEngine``),
/// writers on several machines side by side (``SideBySideWritingEngine``), pushed notices of
/// other hosts' writes (``ChangeNoticeEngine``), upkeep while a ticker runs
/// (``UpkeepEngine``), waits that a closing store abandons (``AbandonableEngine``), and
/// details for the diagnostics (``DetailedEngine``).
package protocol StorageEngine: Sendable {
    /// Runs `body` in one read transaction (one snapshot).
    func read<T: Sendable>(_ body: @escaping @Sendable (any RepositoryReading) throws -> T) async throws -> T
    /// Runs `body` in one write transaction, and commits it or rolls it back as `body` says;
    /// returns the value `body` ended it with. A failure rolls it back and is thrown as it is.
    func write<T: Sendable>(
        _ body: @escaping @Sendable (any RepositoryWriting) throws -> TransactionEnd<T>
    ) async throws -> T
    /// ``read(_:)`` for a body that reads events by ID (a reader's next events, the last ID).
    func readEvents<T: Sendable>(_ body: @escaping @Sendable (any RepositoryReading) throws -> T) async throws -> T
    /// A number that changes whenever another connection (another process) commits; the ticker
    /// polls it to notice writes it was not told about.
    func foreignChangeToken() async throws -> Int
    /// The migrations the database records, in the order they were applied.
    func appliedMigrations() async throws -> [String]
    /// The migrations this build knows, in order.
    var knownMigrations: [String] { get }
    /// The engine's own integrity check: `["ok"]` when the database is sound. `quick`: a faster
    /// form where the engine has one.
    func integrityCheck(quick: Bool) async throws -> [String]
    /// Closes what the store opened itself; leaves a host's database open.
    func close() throws
}

extension StorageEngine {
    /// ``read(_:)``: an engine whose writers commit events out of order readies what reads of
    /// events by ID need first.
    package func readEvents<T: Sendable>(_ body: @escaping @Sendable (any RepositoryReading) throws -> T) async throws
        -> T
    {
        try await read(body)
    }
}

/// How a write's body ends its transaction (commit or roll back), with the value
/// the write returns either way.
package enum TransactionEnd<T: Sendable>: Sendable {
    /// Commit, and return the value.
    case commit(T)
    /// Roll back everything the transaction wrote, and return the value.
    case rollBack(T)

    /// The value the write returns.
    package var value: T {
        switch self {
        case .commit(let value), .rollBack(let value): value
        }
    }

    /// Whether the transaction commits.
    package var commits: Bool {
        if case .commit = self { return true }
        return false
    }
}

