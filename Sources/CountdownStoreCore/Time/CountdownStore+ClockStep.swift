import Foundation

// The clock step: at the start of every transaction the store's clocks (W, A, G) move from the
// last checkpoint to now, on this host's readings, and the checkpoint follows when it may. The
// time model article explains the rules; this file is where they are applied, for every engine.

extension CountdownStore {
    /// Keeps the checkpoint and lease as this transaction leaves them: called by the few
    /// operations that change either after ``advanceClocks(_:)`` recorded them.
    func remember(_ tx: any RepositoryReading) throws {
        let (checkpoint, lease, _) = try tx.clocks()
        remember(checkpoint, leaseExpiry: lease.expiresAtMs)
    }

    func remember(_ checkpoint: Checkpoint?, leaseExpiry: Int64) {
        state.withLock { memory in
            memory.lastCheckpoint = checkpoint
            memory.lastLeaseExpiry = leaseExpiry
        }
    }

    /// The store's clocks now, computed from the last checkpoint this instance saw, without a query;
    /// `nil` before the first transaction.
    func cachedTime() -> ClocksNow? {
        let reading = capabilities.clockReading(ClockReading(configuration.clock))
        let (checkpoint, leaseExpiry) = state.withLock { ($0.lastCheckpoint, $0.lastLeaseExpiry) }
        guard let checkpoint else { return nil }
        let extrapolation = checkpoint.extrapolate(to: reading, leaseExpiresAt: leaseExpiry)
        return ClocksNow(raiseFloor(extrapolation.time), base: checkpoint, ticking: extrapolation.ticking)
    }

    /// The clocks extrapolated to a reading of this host's clock taken now, as the engine places
    /// it (its wall clock is the database's where the engine has one), and that reading.
    ///
    /// The reading is taken after the clock query, which on a server engine waits for the clock row's
    /// lock: a reading taken before would be older than a checkpoint another writer saved
    /// meanwhile, and look like the clock moving back.
    func extrapolate(
        _ tx: any RepositoryReading
    ) throws -> (Extrapolation, Checkpoint, Lease, SoonestDeadlines, ClockReading) {
        let (stored, lease, soonest) = try tx.clocks()
        guard let checkpoint = stored else {
            throw CountdownError(.unreadableDatabase, "the countdown_clock row is missing")
        }
        let reading = try capabilities.clockReading(ClockReading(configuration.clock), in: tx)
        return (
            checkpoint.extrapolate(to: reading, leaseExpiresAt: lease.expiresAtMs), checkpoint, lease, soonest, reading
        )
    }

    /// `time`, raised so that this instance never hands out a clock reading below an earlier one.
    func raiseFloor(_ time: StoreTime) -> StoreTime {
        state.withLock { memory in
            let raised = memory.floor.map { time.notBelow($0) } ?? time
            memory.floor = raised
            return raised
        }
    }

    /// Moves the clocks to now, recording first the expiry of at most `expiryLimit` countdowns
    /// that came due (oldest first), then moves the checkpoint there, recording a clock event
    /// when the system clock was moved.
    ///
    /// A move that would place an unrecorded expiry elsewhere on W is not made: the checkpoint
    /// stays until the backlog is recorded (the article "The time model" says why, under
    /// "Between the deadline and the recorded expiry"). Where writers run side by side
    /// (``SideBySideWritingEngine``), it moves only when `forced` or when the clock
    /// was edited and no other instance holds a live lease.
    func advanceClocks(
        _ tx: WriteTransaction, movingCheckpoint forced: Bool, expiryLimit: Int, leavingToHolder: Bool = false
    ) throws -> (ClocksNow, [ItemRecord]) {
        let sideBySide = capabilities.writersRunSideBySide
        if forced && sideBySide { try capabilities.lockClocks(in: tx) }
        // One reading for both: the new checkpoint's boot instant must be the one its clocks
        // were extrapolated to, or every transaction that straddles a millisecond would count
        // that millisecond twice.
        var (extrapolation, checkpoint, lease, soonest, reading) = try extrapolate(tx)
        var moves = movesCheckpoint(extrapolation, checkpoint, lease, forced: forced)
        if moves && sideBySide && !forced {
            // Found the clock edited: read the clocks again under the row's lock, which another
            // writer moving the checkpoint may have held meanwhile.
            try capabilities.lockClocks(in: tx)
            (extrapolation, checkpoint, lease, soonest, reading) = try extrapolate(tx)
            moves = movesCheckpoint(extrapolation, checkpoint, lease, forced: forced)
        }
        let time = raiseFloor(extrapolation.time)
        var now = ClocksNow(time, base: checkpoint, ticking: extrapolation.ticking)
        now.reading = reading
        let due = soonest.due(at: time)
        let expired: [ItemRecord]
        let backlog: SoonestDeadlines?
        if due == SoonestDeadlines() {
            (expired, backlog) = ([], nil)
        } else if leavingToHolder, lease.holder != nil, lease.expiresAtMs > extrapolation.unflooredWall {
            // The holder's ticker records them: all that are due stay the backlog.
            (expired, backlog) = ([], due)
        } else {
            (expired, backlog) = try Self.recordDueExpiries(tx, now, on: due, limit: expiryLimit, rotation: state)
        }
        guard moves else {
            remember(checkpoint, leaseExpiry: lease.expiresAtMs)
            return (now, expired)
        }
        // The checkpoint is saved at this instance's reading, floor included, on every engine.
        // The floor is above the extrapolation when another instance moved the checkpoint on a
        // reading behind this one's (another host's clock, say): saved as extrapolated, the
        // timelines would go back for the next instance, behind the offsets of the items this
        // one started meanwhile (they would then show their full remaining time yet sort and
        // come due later).
        var next = checkpoint.advanced(to: time, from: extrapolation, at: reading)
        // How far the checkpoint's W was moved ahead of the reading (see `advanced`): the skews
        // it records are measured against that W.
        let movedAhead = next.heartbeatAt - extrapolation.unflooredWall
        if let backlog, !next.keepsPlacement(of: backlog, from: checkpoint) {
            // Expiries still to record would be placed elsewhere from the moved checkpoint.
            remember(checkpoint, leaseExpiry: lease.expiresAtMs)
            now.checkpointBehindBacklog = true
            return (now, expired)
        }
        let edited = clockEdited(extrapolation, checkpoint)
        if edited {
            try tx.append(
                EventRecord(
                    .clockEdited, at: time,
                    detail: [
                        "skew_ms": extrapolation.skew, "previous_skew_ms": checkpoint.clockSkew,
                        "system_ms": reading.system, "same_boot": extrapolation.sameBoot ? 1 : 0,
                    ]))
            configuration.logger.warning(
                "system clock moved against the store clock; counting by the boot clock",
                metadata: [
                    "skew_ms": "\(extrapolation.skew)", "previous_skew_ms": "\(checkpoint.clockSkew)",
                    "same_boot": "\(extrapolation.sameBoot)",
                ])
        }
        if edited || !extrapolation.sameBoot { next.clockSkew = extrapolation.skew - movedAhead }
        if let measured = capabilities.databaseClockSkew(wall: next.heartbeatAt, in: tx) {
            // Hosts sharing the database read its clock less this skew: every checkpoint records
            // it as measured now, so that their W stays the holder's (whose boot clock counts)
            // to within the measurement's precision, whatever either clock drifted.
            next.clockSkew = measured
        }
        try tx.save(next, creating: false)
        remember(next, leaseExpiry: lease.expiresAtMs)
        return (now, expired)
    }

    /// Whether the system clock moved against the store clock since `checkpoint` by more than
    /// the tolerance, plus how far the reading itself may be off (a slow round trip to a
    /// database server whose clock is the system clock leaves the instant of its reading vague).
    func clockEdited(_ extrapolation: Extrapolation, _ checkpoint: Checkpoint) -> Bool {
        let tolerance = configuration.clockEditTolerance.milliseconds + extrapolation.skewUncertainty
        return extrapolation.sameBoot
            ? abs(extrapolation.skew - checkpoint.clockSkew) > tolerance
            : extrapolation.skew < -tolerance
    }

    /// Whether this write moves the checkpoint (see ``advanceClocks(_:movingCheckpoint:)``).
    func movesCheckpoint(_ extrapolation: Extrapolation, _ checkpoint: Checkpoint, _ lease: Lease, forced: Bool) -> Bool
    {
        if let holder = lease.holder, holder != instanceID, lease.expiresAtMs > extrapolation.unflooredWall,
            capabilities.writersRunSideBySide
        {
            // Another instance holds a live lease: it alone moves the checkpoint and records
            // clock events, measured on its own boot clock.
            return false
        }
        return forced || !capabilities.writersRunSideBySide || clockEdited(extrapolation, checkpoint)
    }
}
