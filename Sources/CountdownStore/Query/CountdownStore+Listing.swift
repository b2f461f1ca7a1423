import Foundation
import GRDB

/// Which items ``CountdownStore/list(_:group:limit:)`` returns.
public enum StateFilter: String, Sendable, Hashable, CaseIterable {
    /// Running and paused, soonest to expire first (stopwatches last).
    case active
    /// Running only, soonest first.
    case running
    /// Paused only, least remaining first.
    case paused
    /// Expired, most recent first.
    case expired
    /// Cancelled, most recent first.
    case cancelled
    /// Everything: active ones first, soonest first, then ended ones, most recent first.
    case all
}

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
}

extension CountdownStore {
    /// Items in the states `filter` names, optionally of one group, at most `limit`.
    public func list(_ filter: StateFilter = .active, group: String? = nil, limit: Int = 100) async throws(CountdownError) -> [Countdown] {
        let limit = try Validate.limit(limit)
        switch filter {
        case .active:
            return try await active(group: group, limit: limit).items
        case .paused:
            return try await paused(group: group, limit: limit)
        case .expired:
            return try await expired(group: group, limit: limit)
        case .cancelled:
            let group = try Validate.group(group)
            return try await reading { tx, time in
                try tx.ended(.cancelled, group: group, limit: limit).map { $0.countdown(at: time) }
            }
        case .running:
            var items: [Countdown] = []
            var cursor: ActiveCursor?
            repeat {
                let page = try await active(group: group, limit: limit, after: cursor)
                items += page.items.filter { $0.state == .running }
                cursor = page.next
            } while cursor != nil && items.count < limit
            return Array(items.prefix(limit))
        case .all:
            var items = try await active(group: group, limit: limit).items
            if items.count < limit {
                let group = try Validate.group(group)
                let ended = try await reading { tx, time in
                    (try tx.ended(.expired, group: group, limit: limit) + tx.ended(.cancelled, group: group, limit: limit))
                        .sorted { ($0.endedAtMs ?? 0, $1.key) > ($1.endedAtMs ?? 0, $0.key) }
                        .map { $0.countdown(at: time) }
                }
                items += ended.prefix(limit - items.count)
            }
            return items
        }
    }

    /// The most recent events, newest first, optionally only of some kinds.
    public func recentEvents(kinds: [CountdownEvent.Kind]? = nil, limit: Int = 20) async throws(CountdownError) -> [CountdownEvent] {
        let limit = try Validate.limit(limit)
        let names = kinds?.map(\.rawValue)
        return try await reading { tx, _ in try tx.recentEvents(kinds: names, limit: limit).map(CountdownEvent.init) }
    }

    /// Schema, integrity, counts, clocks and lease, for `countdown doctor`.
    public func diagnostics() async throws(CountdownError) -> StoreDiagnostics {
        let (applied, integrity) = try await translatingErrors(path: path) {
            try await database.read { db in
                (try Migrator.applied(db), try String.fetchAll(db, sql: "PRAGMA integrity_check"))
            }
        }
        return StoreDiagnostics(
            appliedMigrations: applied, knownMigrations: Migration.embedded.map(\.name), integrity: integrity,
            counts: try await counts(), clock: try await clockStatus(),
            recentClockEvents: try await recentEvents(kinds: [.clockEdited, .calibrated], limit: 10))
    }
}
