import Foundation

/// The `countdown_clock` row: the store's clocks at the last checkpoint.
///
/// Every process extrapolates the clocks from it the same way (and the `countdown_now` view
/// does too, with the system clock alone), so there is one time model, not one per process.
package struct Checkpoint: Sendable, Hashable {
    package var createdAt: Int64
    package var active: Int64
    package var gap: Int64
    package var heartbeatAt: Int64
    package var heartbeatBoot: Int64
    package var bootID: String?
    package var wallFloor: Int64
    package var suspended: Bool
    package var calibrationOffset: Int64
    package var calibratedAt: Int64?
    package var clockSkew: Int64

    /// The checkpoint of a store created now.
    package static func initial(at reading: ClockReading) -> Checkpoint {
        Checkpoint(
            createdAt: reading.system, active: 0, gap: 0,
            heartbeatAt: reading.system, heartbeatBoot: reading.boot, bootID: reading.bootID,
            wallFloor: reading.system, suspended: false, calibrationOffset: 0, calibratedAt: nil, clockSkew: 0)
    }

    /// The store's clocks at `reading`, extrapolated from this checkpoint.
    ///
    /// - Within the boot of the checkpoint, time since it is measured by the boot clock alone,
    ///   so edits of the system clock move nothing.
    /// - Across a reboot only the wall clock exists: it is trusted, but W never goes backwards.
    /// - Unless the host is suspended, time since the checkpoint is active up to the instant the
    ///   lease runs out (`leaseExpiresAt`, in W), and background gap after it. So A stands still
    ///   once a lease holder stops renewing, at the value every reader saw it reach: it never
    ///   goes back. Suspended, all of it is background gap.
    func extrapolate(to reading: ClockReading, leaseExpiresAt: Int64) -> Extrapolation {
        let sameBoot = bootID != nil && bootID == reading.bootID && reading.boot >= heartbeatBoot
        let trustedWall = reading.system &+ calibrationOffset
        let delta = sameBoot ? reading.boot - heartbeatBoot : max(0, trustedWall &- heartbeatAt)
        let unflooredWall = heartbeatAt + delta
        let ticking = !suspended && leaseExpiresAt > unflooredWall
        let counted = suspended ? 0 : min(delta, max(0, leaseExpiresAt &- heartbeatAt))
        let time = StoreTime(
            wall: wall(after: delta),
            active: active + counted,
            gap: gap + (delta - counted))
        return Extrapolation(
            time: time, unflooredWall: unflooredWall, ticking: ticking, sameBoot: sameBoot,
            skew: trustedWall &- unflooredWall, skewUncertainty: reading.uncertainty)
    }

    /// W when `delta` ms have passed since this checkpoint.
    ///
    /// Normally the checkpoint's W plus `delta`. While W is ahead of the trusted time (after a
    /// calibration to an earlier time, forced), W never goes back: it advances at half speed from
    /// its floor until the trusted time catches up, so instants stay distinct and ordered. The
    /// same formula is written in SQL in the `countdown_now` view.
    func wall(after delta: Int64) -> Int64 {
        max(heartbeatAt + delta, wallFloor + delta / 2)
    }

    /// The item timeline of `policy` at this checkpoint: `A + G` for `wall`, `A` for `active`.
    func timeline(_ policy: CountdownPolicy) -> Int64 {
        policy == .wall ? active + gap : active
    }

    /// Whether this checkpoint, a move from `base`, places every expiry still to record (the
    /// soonest of each timeline in `backlog`) at the instant `base` placed it.
    ///
    /// An expiry due before a checkpoint is placed backwards from it, at
    /// `heartbeatAt − (timeline − deadline)`; one due after, forwards, the same way unless the
    /// checkpoint slews (W at half speed, see ``wall(after:)``). So the instants stay where they
    /// were when `base` did not slew and `heartbeatAt − timeline` is the same for each timeline
    /// that has an expiry to record: every move while a host ticks, and for `wall` countdowns any
    /// move but a calibration.
    func keepsPlacement(of backlog: SoonestDeadlines, from base: Checkpoint) -> Bool {
        guard base.wallFloor <= base.heartbeatAt else { return false }
        return CountdownPolicy.allCases.allSatisfy { policy in
            backlog[policy] == nil || heartbeatAt - timeline(policy) == base.heartbeatAt - base.timeline(policy)
        }
    }

    /// This checkpoint moved to `time` (the clocks of `extrapolation`, raised by the process's
    /// floor), taken at `reading`.
    ///
    /// W at the new checkpoint is the reading's, unless the floor holds this process's W or its
    /// `wall` timeline above the reading (a reading of another server's clock, or one less
    /// precise than an earlier one, falls behind what this process already handed out). Then W
    /// at the checkpoint is moved forward as far as needed to keep `heartbeatAt − (A + G)` where
    /// it was, and never below the W handed out: W never slews for a reading's imprecision, and
    /// every `wall` deadline is placed at or after its countdown's start plus its duration. Only a
    /// calibration makes W slew (``wall(after:)``).
    func advanced(to time: StoreTime, from extrapolation: Extrapolation, at reading: ClockReading) -> Checkpoint {
        var next = self
        next.active = time.active
        next.gap = time.gap
        next.heartbeatAt = extrapolation.unflooredWall
        if wallFloor <= heartbeatAt {
            let timelineRaised = time.timeline(.wall) - extrapolation.time.timeline(.wall)
            next.heartbeatAt = max(extrapolation.unflooredWall + max(0, timelineRaised), time.wall)
        }
        next.heartbeatBoot = reading.boot
        next.bootID = reading.bootID
        next.wallFloor = max(wallFloor, time.wall)
        return next
    }

    /// A checkpoint with every column given.
    package init(
        createdAt: Int64, active: Int64, gap: Int64, heartbeatAt: Int64, heartbeatBoot: Int64, bootID: String?,
        wallFloor: Int64, suspended: Bool, calibrationOffset: Int64, calibratedAt: Int64?, clockSkew: Int64
    ) {
        self.createdAt = createdAt
        self.active = active
        self.gap = gap
        self.heartbeatAt = heartbeatAt
        self.heartbeatBoot = heartbeatBoot
        self.bootID = bootID
        self.wallFloor = wallFloor
        self.suspended = suspended
        self.calibrationOffset = calibrationOffset
        self.calibratedAt = calibratedAt
        self.clockSkew = clockSkew
    }
}
