import Foundation

/// What `countdown doctor` reports about a store.
public struct StoreDiagnostics: Sendable {
    /// The migrations the database records, in the order they were applied.
    public var appliedMigrations: [String]
    /// The migrations this code knows, in order.
    public var knownMigrations: [String]
    /// SQLite's `integrity_check`: `["ok"]` when the file is sound.
    public var integrity: [String]
    /// Items by state and group.
    public var counts: CountdownCounts
    /// The clocks, the calibration and the lease.
    public var clock: ClockStatus
    /// The most recent clock events (edits and calibrations), newest first.
    public var recentClockEvents: [CountdownEvent]
    /// What the database engine adds, in order (PostgreSQL: the server's version, the schema,
    /// the lease's term, how far this host's clock is from the database's); empty for SQLite.
    public var engineDetails: [EngineDetail] = []
}

/// One fact a database engine reports about itself in ``StoreDiagnostics``.
public struct EngineDetail: Sendable, Hashable {
    /// What the fact is about, for example `server`.
    public var name: String
    /// The fact, for people.
    public var value: String

    /// A fact named `name`.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

extension CountdownStore {
    /// Schema, integrity, counts, clocks and lease, for `countdown doctor`.
    public func diagnostics() async throws(CountdownError) -> StoreDiagnostics {
        let engine = engine
        let clock = configuration.clock
        let (applied, integrity, details) = try await translatingErrors(path: path) {
            (try await engine.appliedMigrations(), try await engine.integrityCheck(), try await engine.details(clock: clock))
        }
        return StoreDiagnostics(
            appliedMigrations: applied, knownMigrations: engine.knownMigrations, integrity: integrity,
            counts: try await counts(), clock: try await clockStatus(),
            recentClockEvents: try await recentEvents(kinds: [.clockEdited, .calibrated], limit: 10),
            engineDetails: details)
    }
}
