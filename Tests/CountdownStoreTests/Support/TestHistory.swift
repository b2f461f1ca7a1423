import CountdownStorePostgres
import Foundation
import Testing

@testable import CountdownStoreCore

/// What a fleet run under faults did, as a history: every operation with its invocation, its
/// completion and its outcome; the remaining time readers saw; the faults, each with its span.
/// ``HistoryChecker`` checks it, with the store's tables and the hosts' printed deliveries,
/// against every invariant at once.
final class History: Sendable {
    /// One attempt at an operation.
    struct Operation: Sendable, CustomStringConvertible {
        enum Kind: String, Sendable { case start, extend }
        enum Outcome: Sendable, Equatable {
            /// Acknowledged: the store said it was done.
            case ok
            /// Failed with a transient error (a lost connection, a server refusing writes): it
            /// may or may not have taken effect, and may be tried again.
            case indeterminate(String)
            /// Refused for good.
            case failed(String)
        }
        let writer: String
        let kind: Kind
        let key: String
        let milliseconds: Int64
        let invokedAt: Date
        let completedAt: Date
        let outcome: Outcome
        var description: String { "\(writer) \(kind) \(key) \(milliseconds) ms → \(outcome)" }
    }

    /// A reading of one countdown's remaining time.
    struct Reading: Sendable {
        let key: String
        let generation: Int
        let at: Date
        let remainingMs: Int64
    }

    /// A fault, from its start to its end (the end of the fault itself, e.g. the promotion).
    struct Fault: Sendable {
        let name: String
        let start: Date
        var end: Date
    }

    /// The seed the run's plan was drawn from (printed, so that it can be replayed).
    let seed: UInt64
    private let operations = Locked<[Operation]>([])
    private let readings = Locked<[Reading]>([])
    private let faults = Locked<[Fault]>([])

    init(seed: UInt64) {
        self.seed = seed
    }

    var allOperations: [Operation] { operations.withLock { $0 } }
    var allReadings: [Reading] { readings.withLock { $0 } }
    var allFaults: [Fault] { faults.withLock { $0 } }

    func record(_ operation: Operation) { operations.withLock { $0.append(operation) } }
    func record(_ reading: Reading) { readings.withLock { $0.append(reading) } }

    /// Runs `body` as fault `name`, recording its span.
    func fault<T>(_ name: String, _ body: () async throws -> T) async rethrows -> T {
        let start = Date()
        let value = try await body()
        faults.withLock { $0.append(Fault(name: name, start: start, end: Date())) }
        return value
    }

    // MARK: Writing through the history

    /// Starts countdown `key` through `store`, as a careful client does: a transient failure is
    /// recorded and the start tried again (at most for `patience`); a retry that finds the key
    /// already running means an earlier attempt took effect.
    func start(_ key: String, milliseconds: Int64, writer: String, store: CountdownStore, patience: TimeInterval = 60) async throws {
        let giveUp = Date().addingTimeInterval(patience)
        var triedBefore = false
        while true {
            let invoked = Date()
            do {
                try await store.start(key, duration: .milliseconds(milliseconds))
                record(Operation(writer: writer, kind: .start, key: key, milliseconds: milliseconds, invokedAt: invoked, completedAt: Date(), outcome: .ok))
                return
            } catch {
                if error.code == .alreadyActive, triedBefore {
                    // An earlier attempt committed before its connection was lost.
                    record(Operation(writer: writer, kind: .start, key: key, milliseconds: milliseconds, invokedAt: invoked, completedAt: Date(), outcome: .ok))
                    return
                }
                guard error.isTransient || error.code == .ioFailure, Date() < giveUp else {
                    record(Operation(writer: writer, kind: .start, key: key, milliseconds: milliseconds, invokedAt: invoked, completedAt: Date(), outcome: .failed("\(error)")))
                    throw error
                }
                record(Operation(writer: writer, kind: .start, key: key, milliseconds: milliseconds, invokedAt: invoked, completedAt: Date(), outcome: .indeterminate(error.message)))
                triedBefore = true
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    /// Reads the remaining time of `keys` every `everyMs` until cancelled (errors are skipped:
    /// a reader during a fault may fail).
    func watchRemaining(_ keys: [String], store: CountdownStore, everyMs: Int = 200) async {
        while !Task.isCancelled {
            for key in keys {
                if let item = try? await store.countdown(key), let remaining = item.remaining {
                    record(Reading(key: key, generation: Int(item.generation), at: Date(), remainingMs: Int64(remaining.milliseconds)))
                }
            }
            try? await Task.sleep(for: .milliseconds(everyMs))
        }
    }
}

/// What ``HistoryChecker/check(_:database:hosts:keys:duplicateWindow:)`` found: each invariant's
/// violations (empty when it holds), and the figures of the run.
struct HistoryVerdict: Sendable {
    var lostAcknowledged: [String] = []
    var earlyExpiries: [String] = []
    /// Expiries whose deadline is before the recorded `started_at` + duration, though fired at
    /// or after the deadline: `started_at` (W) and the deadline (the item's timeline) disagree.
    var deadlinesBeforeStart: [String] = []
    var notExpiredOnce: [String] = []
    var undelivered: [String] = []
    var duplicatesAwayFromFaults: [String] = []
    /// Expiries delivered more than once although no reader that printed them was killed,
    /// stopped while cut off from the database, or told that its claim was taken over.
    var duplicatesUnexplained: [String] = []
    var termViolations: [String] = []
    var remainingIncreases: [String] = []
    /// Figures.
    var acknowledged = 0
    var indeterminate = 0
    var duplicatesNearFaults = 0
    /// The expiries delivered more than once, by what their first reader went through.
    var duplicatesByCause: [String: Int] = [:]

    /// ``duplicatesByCause`` as text, for the report.
    var duplicateCauses: String {
        duplicatesByCause.isEmpty
            ? "none" : duplicatesByCause.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
    }
    var expiries = 0
    var terms: [Int64] = []

    /// Records an issue for every invariant that does not hold; `except` names those a scenario
    /// only measures (what asynchronous replication may lose).
    func expectAll(except: Set<String> = [], _ scenario: String, seed: UInt64) {
        let checks: [(String, [String])] = [
            ("lostAcknowledged", lostAcknowledged), ("earlyExpiries", earlyExpiries),
            ("deadlinesBeforeStart", deadlinesBeforeStart), ("notExpiredOnce", notExpiredOnce),
            ("undelivered", undelivered), ("duplicatesAwayFromFaults", duplicatesAwayFromFaults),
            ("duplicatesUnexplained", duplicatesUnexplained),
            ("termViolations", termViolations), ("remainingIncreases", remainingIncreases),
        ]
        for (name, violations) in checks where !except.contains(name) && !violations.isEmpty {
            let text = "\(scenario): \(name) (seed \(seed), replay with COUNTDOWN_FLEET_SEED=\(seed)): \(violations.prefix(10))"
            Issue.record(Comment(rawValue: text))
        }
    }
}

/// Checks a history against the store's tables and the hosts' deliveries.
enum HistoryChecker {
    /// - every acknowledged start is in the store;
    /// - no expiry fired before its deadline (by the server's clock), nor before start + duration;
    /// - every countdown of `keys` expired exactly once in the store (its last generation, and no
    ///   expiry recorded twice), and was delivered at least once to the consumer; a delivery
    ///   twice only within `duplicateWindow` of a fault, and only by a cause SPEC allows: a
    ///   reader that printed it was killed, or stopped while cut off from the database (its
    ///   acknowledgement could not be written), or was told its claim was taken over while it
    ///   could not reach the database (each counted in ``HistoryVerdict/duplicatesByCause``);
    /// - at most one holder per lease term, and terms only grow (the audit's lease rows);
    /// - the remaining time of a countdown never grew between two readings of one generation.
    static func check(
        _ history: History, database: FleetDatabase, hosts: [FleetHost], keys: [String], duplicateWindow: TimeInterval
    ) async throws -> HistoryVerdict {
        var verdict = HistoryVerdict()
        let items = Dictionary(try await database.items().map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        let operations = history.allOperations
        verdict.acknowledged = operations.filter { $0.outcome == .ok }.count
        verdict.indeterminate = operations.filter { if case .indeterminate = $0.outcome { return true } else { return false } }.count
        for operation in operations where operation.outcome == .ok && items[operation.key] == nil {
            verdict.lostAcknowledged.append(operation.description)
        }

        let expiries = try await database.expiries()
        verdict.expiries = expiries.count
        var recorded: [ExpiryID: FleetExpiry] = [:]
        var count: [ExpiryID: Int] = [:]
        for expiry in expiries {
            let id = ExpiryID(key: expiry.key, generation: expiry.generation)
            recorded[id] = expiry
            count[id, default: 0] += 1
            if expiry.fired_at_ms < expiry.deadline_at_ms || expiry.late_ms < 0 {
                verdict.earlyExpiries.append("\(id) fired \(expiry.fired_at_ms) before its deadline \(expiry.deadline_at_ms)")
            }
            if let item = items[expiry.key], item.generation == expiry.generation, let duration = item.duration_ms,
               expiry.deadline_at_ms < item.started_at_ms + duration + item.paused_ms {
                verdict.deadlinesBeforeStart.append("\(id): deadline \(expiry.deadline_at_ms) before start \(item.started_at_ms) + \(duration) ms")
            }
        }
        for (id, times) in count where times > 1 { verdict.notExpiredOnce.append("\(id) recorded \(times) times") }
        for key in keys {
            guard let item = items[key] else { continue }
            let id = ExpiryID(key: key, generation: item.generation)
            if item.state != "expired" || count[id] != 1 { verdict.notExpiredOnce.append("\(id) is \(item.state), expired \(count[id] ?? 0) times") }
        }

        var deliveries: [ExpiryID: Int] = [:]
        var printers: [ExpiryID: [FleetHost]] = [:]
        for host in hosts {
            for line in host.printed() {
                let id = ExpiryID(key: line.key, generation: line.generation)
                deliveries[id, default: 0] += 1
                printers[id, default: []].append(host)
            }
        }
        let faults = history.allFaults
        for (id, expiry) in recorded {
            let times = deliveries[id] ?? 0
            if times == 0 { verdict.undelivered.append(id.description) }
            if times > 1 {
                let fired = Date(timeIntervalSince1970: Double(expiry.fired_at_ms) / 1000)
                let nearFault = faults.contains {
                    fired >= $0.start.addingTimeInterval(-duplicateWindow) && fired <= $0.end.addingTimeInterval(duplicateWindow)
                }
                if nearFault { verdict.duplicatesNearFaults += 1 } else { verdict.duplicatesAwayFromFaults.append("\(id) delivered \(times) times") }
                let cause = duplicateCause(printers[id] ?? [])
                verdict.duplicatesByCause[cause ?? "unexplained", default: 0] += 1
                if cause == nil {
                    let warnings = (printers[id] ?? []).map { host in
                        "\(host.name): " + host.helper.stderr.split(separator: "\n").filter { $0.contains("warning") }.suffix(6)
                            .joined(separator: " | ")
                    }
                    verdict.duplicatesUnexplained.append(
                        "\(id) delivered \(times) times, by \((printers[id] ?? []).map(\.name)), none killed or cut off; \(warnings)")
                }
            }
        }

        var holders: [Int64: Set<String>] = [:]
        var lastTerm: Int64 = .min
        for row in try await database.audit() where row.tbl == "lease" {
            guard let term = row.lease_term else { continue }
            if let holder = row.lease_holder { holders[term, default: []].insert(holder) }
            if term < lastTerm { verdict.termViolations.append("term went back from \(lastTerm) to \(term) (audit #\(row.id))") }
            lastTerm = max(lastTerm, term)
        }
        for (term, names) in holders where names.count > 1 { verdict.termViolations.append("term \(term) had holders \(names.sorted())") }
        verdict.terms = holders.keys.sorted()

        var last: [String: History.Reading] = [:]
        for reading in history.allReadings.sorted(by: { $0.at < $1.at }) {
            let id = "\(reading.key)#\(reading.generation)"
            if let before = last[id], reading.remainingMs > before.remainingMs {
                verdict.remainingIncreases.append("\(id): \(before.remainingMs) ms, then \(reading.remainingMs) ms \(reading.at.timeIntervalSince(before.at)) s later")
            }
            last[id] = reading
        }
        return verdict
    }

    /// Why a reader that printed an expiry another reader printed too let it go, from what the
    /// test did to it and what it logged; `nil` when nothing explains it.
    static func duplicateCause(_ printers: [FleetHost]) -> String? {
        if printers.contains(where: \.wasKilled) { return "by a reader killed" }
        let logs = printers.map(\.helper.stderr)
        if logs.contains(where: { $0.contains("could not acknowledge an expiry before stopping") }) {
            return "by a reader stopped while cut off from the database"
        }
        if logs.contains(where: { $0.contains("another reader took this expiry over") }) {
            return "by a reader whose claim was taken over while it could not reach the database"
        }
        return nil
    }
}
