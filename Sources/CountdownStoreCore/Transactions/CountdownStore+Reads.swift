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

    /// The timelines on which a deadline can come due now, and the boot-clock instant of a
    /// deadline on each: what the reads of a next deadline below share.
    struct DeadlineTimelines {
        /// The store's clocks now, the floor raised.
        let time: StoreTime
        /// `wall`, and `active` while it runs (a suspended host or no lease holder stops it).
        let policies: [CountdownPolicy]
        /// The boot clock at the reading.
        let bootNow: Int64

        /// The boot-clock instant at which `deadline` on `policy`'s timeline comes (now when past).
        func boot(of deadline: Int64, on policy: CountdownPolicy) -> Int64 {
            bootNow + max(0, deadline - time.timeline(policy))
        }
    }

    /// Runs `body` in one read transaction with the ``DeadlineTimelines`` of now and the soonest
    /// deadlines of running countdowns.
    private func readingDeadlines<T: Sendable>(
        _ body: @escaping @Sendable (any RepositoryReading, DeadlineTimelines, SoonestDeadlines) throws -> T
    ) async throws(CountdownError) -> T {
        try await translatingErrors(path: path) {
            try await underWay.run {
                try await engine.read { tx in
                    let (extrapolation, checkpoint, lease, soonest, reading) = try self.extrapolate(tx)
                    self.remember(checkpoint, leaseExpiry: lease.expiresAtMs)
                    let timelines = DeadlineTimelines(
                        time: self.raiseFloor(extrapolation.time),
                        policies: extrapolation.ticking ? [.wall, .active] : [.wall], bootNow: reading.boot)
                    return try body(tx, timelines, soonest)
                }
            }
        }
    }

    /// The boot-clock instant at which the next running countdown comes due, from the soonest
    /// deadlines (index lookups); now when one has come due and is not recorded yet; `nil` when
    /// none will come due while the host stays as it is (an `active` countdown never comes due
    /// while suspended or while nobody holds the lease).
    func nextDueBoot() async throws(CountdownError) -> Int64? {
        try await readingDeadlines { _, timelines, soonest in
            timelines.policies.compactMap { policy in soonest[policy].map { timelines.boot(of: $0, on: policy) } }.min()
        }
    }

    /// The boot-clock instant of the soonest deadline still ahead (of a running countdown not
    /// due yet) when that countdown's group has none due now, `nil` otherwise: while a backlog
    /// is recorded, the instant by which the ticker's batch should have ended, so that a
    /// countdown of a group with no backlog of its own is in the next batch when it comes due.
    /// (One of a group with a backlog waits behind its own group's anyway.)
    func nextQuietGroupDeadlineBoot() async throws(CountdownError) -> Int64? {
        try await readingDeadlines { tx, timelines, _ -> Int64? in
            let time = timelines.time
            var soonest: (boot: Int64, group: String?)?
            for policy in timelines.policies {
                guard
                    let item = try tx.items(
                        .running(policy: policy, group: nil, after: nil, notDueBy: time.timeline(policy)), limit: 1
                    ).first, let deadline = item.deadlineMs
                else { continue }
                let boot = timelines.boot(of: deadline, on: policy)
                if boot < soonest?.boot ?? .max { soonest = (boot, item.group) }
            }
            guard let soonest else { return nil }
            // (Countdowns of no group count as quiet: no list reads them alone.)
            guard let group = soonest.group else { return soonest.boot }
            for policy in timelines.policies {
                let due = try tx.items(.running(policy: policy, dueBy: time.timeline(policy), group: group), limit: 1)
                if !due.isEmpty { return nil }
            }
            return soonest.boot
        }
    }

    /// The boot-clock instant of the soonest deadline of a running countdown of `group` (any
    /// group when `nil`), `nil` when none runs: an overdue one (its expiry not recorded yet) is
    /// due now. A reader of expiries waits for it, as well as for a change, so that an expiry
    /// another process records reaches it soon after its deadline rather than at its next poll.
    func nextDeadlineBoot(group: String?) async throws(CountdownError) -> Int64? {
        try await readingDeadlines { tx, timelines, _ in
            try timelines.policies.compactMap { policy in
                try tx.items(.running(policy: policy, group: group, after: nil, notDueBy: nil), limit: 1)
                    .first?.deadlineMs.map { timelines.boot(of: $0, on: policy) }
            }.min()
        }
    }

    /// A number that changes whenever another connection (another process) commits.
    func foreignChangeToken() async throws(CountdownError) -> Int {
        try await translatingErrors(path: path) { try await underWay.run { try await engine.foreignChangeToken() } }
    }
}
