import Foundation

/// What `countdown doctor` reports about a store.
public struct StoreDiagnostics: Sendable {
    /// The migrations the database records, in the order they were applied.
    public var appliedMigrations: [String]
    /// The migrations this code knows, in order.
    public var knownMigrations: [String]
    /// The engine's integrity check (full or quick, as asked): `["ok"]` when
    /// the database is sound, also when the check was skipped.
    public var integrity: [String]
    /// Which integrity check ran.
    public var integrityCheck: IntegrityCheck = .full
    /// How long the integrity check took (zero when skipped).
    public var integrityDuration: Duration = .zero
    /// Items by state and group.
    public var counts: CountdownCounts
    /// The clocks, the calibration and the lease.
    public var clock: ClockStatus
    /// The most recent clock events (edits and calibrations), newest first.
    public var recentClockEvents: [CountdownEvent]
    /// What the database engine adds, in order (a server engine: the server's version, the
    /// schema, the lease's term, how far this host's clock is from the database's); empty for
    /// the embedded engine.
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

/// How thoroughly ``CountdownStore/diagnostics(integrity:)`` checks the database. Every check
/// but ``skip`` reads the whole database: on the embedded engine, about a second per million countdowns for
/// the full check.
public enum IntegrityCheck: String, Sendable, Hashable, CaseIterable {
    /// Every page, every index against its table.
    case full
    /// Every page, without comparing indexes with their tables: several times faster where the
    /// engine has such a form, else the same as ``full``.
    case quick
    /// No check: the diagnostics then read nothing in proportion to the store's size but its counts.
    case skip
}

extension CountdownStore {
    /// Schema, integrity, counts, clocks and lease, for `countdown doctor`.
    ///
    /// - Parameter integrity: how thoroughly to check the database (``IntegrityCheck/full`` by default).
    public func diagnostics(integrity check: IntegrityCheck = .full) async throws(CountdownError) -> StoreDiagnostics {
        let (engine, detailed) = (engine, capabilities.detailed)
        let clock = configuration.clock
        let (applied, integrity, duration, details) = try await translatingErrors(path: path) {
            let applied = try await engine.appliedMigrations()
            let started = ContinuousClock.now
            let integrity = check == .skip ? ["ok"] : try await engine.integrityCheck(quick: check == .quick)
            let duration = check == .skip ? Duration.zero : ContinuousClock.now - started
            return (applied, integrity, duration, try await detailed?.details(clock: clock) ?? [])
        }
        return StoreDiagnostics(
            appliedMigrations: applied, knownMigrations: engine.knownMigrations, integrity: integrity,
            integrityCheck: check, integrityDuration: duration,
            counts: try await counts(), clock: try await clockStatus(),
            recentClockEvents: try await recentEvents(kinds: [.clockEdited, .calibrated], limit: 10),
            engineDetails: details)
    }
}
