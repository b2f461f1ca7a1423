import Foundation

// The store's reads: each runs in one read transaction of the engine, with the store's clocks
// extrapolated to now. (Writes go through the write pipeline, `WritePipeline.swift`.)

extension CountdownStore {
    /// Runs `body` in one read transaction with the store's clocks extrapolated to now.
    ///
    /// The body also learns whether any running countdown has come due (expired for every
    /// reader, not recorded yet), from the soonest deadlines the clock query reads anyway.
    func reading<T: Sendable>(
        events: Bool = false, _ body: @escaping @Sendable (any RepositoryReading, ClocksNow) throws -> T
    ) async throws(CountdownError) -> T {
        try await reading(events: events) { tx, now, _ in try body(tx, now) }
    }

    /// ``reading(_:)`` whose body also gets the soonest deadlines of running countdowns. With
    /// `events`, the body reads events by ID (see ``StorageEngine/readEvents(_:)``).
    func reading<T: Sendable>(
        events: Bool = false,
        _ body: @escaping @Sendable (any RepositoryReading, ClocksNow, SoonestDeadlines) throws -> T
    ) async throws(CountdownError) -> T {
        try await translatingErrors(path: path) {
            try await underWay.run {
                let read = { @Sendable (tx: any RepositoryReading) throws -> T in
                    let (extrapolation, checkpoint, lease, soonest, reading) = try self.extrapolate(tx)
                    self.remember(checkpoint, leaseExpiry: lease.expiresAtMs)
                    var now = ClocksNow(
                        self.raiseFloor(extrapolation.time), base: checkpoint, ticking: extrapolation.ticking)
                    now.reading = reading
                    return try body(tx, now, soonest)
                }
                return try await events ? engine.readEvents(read) : engine.read(read)
            }
        }
    }

    /// The boot-clock instant at which the next running countdown comes due, from the soonest
    /// deadlines (index lookups); now when one has come due and is not recorded yet; `nil` when
    /// none will come due while the host stays as it is (an `active` countdown never comes due
    /// while suspended or while nobody holds the lease).
    func nextDueBoot() async throws(CountdownError) -> Int64? {
        try await translatingErrors(path: path) {
            try await underWay.run {
                try await engine.read { tx in
                    let (extrapolation, checkpoint, lease, soonest, reading) = try self.extrapolate(tx)
                    self.remember(checkpoint, leaseExpiry: lease.expiresAtMs)
                    let time = self.raiseFloor(extrapolation.time)
                    var policies: [CountdownPolicy] = [.wall]
                    if extrapolation.ticking { policies.append(.active) }
                    return policies.compactMap { policy in
                        soonest[policy].map { reading.boot + max(0, $0 - time.timeline(policy)) }
                    }.min()
                }
            }
        }
    }

    /// The boot-clock instant of the soonest deadline still ahead (of a running countdown not
    /// due yet) when that countdown's group has none due now, `nil` otherwise: while a backlog
    /// is recorded, the instant by which the ticker's batch should have ended, so that a
    /// countdown of a group with no backlog of its own is in the next batch when it comes due.
    /// (One of a group with a backlog waits behind its own group's anyway.)
    func nextQuietGroupDeadlineBoot() async throws(CountdownError) -> Int64? {
        try await translatingErrors(path: path) {
            try await underWay.run {
                try await engine.read { tx -> Int64? in
                    let (extrapolation, _, _, _, reading) = try self.extrapolate(tx)
                    let time = self.raiseFloor(extrapolation.time)
                    var policies: [CountdownPolicy] = [.wall]
                    if extrapolation.ticking { policies.append(.active) }
                    var soonest: (boot: Int64, group: String?)?
                    for policy in policies {
                        guard
                            let item = try tx.items(
                                .running(policy: policy, group: nil, after: nil, notDueBy: time.timeline(policy)),
                                limit: 1
                            ).first, let deadline = item.deadlineMs
                        else { continue }
                        let boot = reading.boot + max(0, deadline - time.timeline(policy))
                        if boot < soonest?.boot ?? .max { soonest = (boot, item.group) }
                    }
                    guard let soonest else { return nil }
                    // (Countdowns of no group count as quiet: no list reads them alone.)
                    guard let group = soonest.group else { return soonest.boot }
                    for policy in policies {
                        let due = try tx.items(
                            .running(policy: policy, dueBy: time.timeline(policy), group: group), limit: 1)
                        if !due.isEmpty { return nil }
                    }
                    return soonest.boot
                }
            }
        }
    }

    /// The boot-clock instant of the soonest deadline of a running countdown of `group` (any
    /// group when `nil`), `nil` when none runs: an overdue one (its expiry not recorded yet) is
    /// due now. A reader of expiries waits for it, as well as for a change, so that an expiry
    /// another process records reaches it soon after its deadline rather than at its next poll.
    func nextDeadlineBoot(group: String?) async throws(CountdownError) -> Int64? {
        try await translatingErrors(path: path) {
            try await underWay.run {
                try await engine.read { tx in
                    let (extrapolation, _, _, _, reading) = try self.extrapolate(tx)
                    let time = self.raiseFloor(extrapolation.time)
                    var policies: [CountdownPolicy] = [.wall]
                    if extrapolation.ticking { policies.append(.active) }
                    return try policies.compactMap { policy in
                        try tx.items(.running(policy: policy, group: group, after: nil, notDueBy: nil), limit: 1)
                            .first?.deadlineMs.map { reading.boot + max(0, $0 - time.timeline(policy)) }
                    }.min()
                }
            }
        }
    }

    /// A number that changes whenever another connection (another process) commits.
    func foreignChangeToken() async throws(CountdownError) -> Int {
        try await translatingErrors(path: path) { try await underWay.run { try await engine.foreignChangeToken() } }
    }
}
