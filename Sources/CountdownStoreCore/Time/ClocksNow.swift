import Foundation

extension ClocksNow: ClockInstant {}

/// The store's clocks at one instant, with the checkpoint they were extrapolated from, so that an
/// instant on an item's own timeline can be placed on the store wall clock.
///
/// Between two checkpoints the clocks run in step: W and the `wall` timeline advance together
/// (W at half speed while it slews, see ``Checkpoint/wall(after:)``), the `active` timeline only
/// until the lease runs out (see ``Checkpoint/extrapolate(to:leaseExpiresAt:)``). A checkpoint
/// moves only in ways that keep the instant at which each countdown due but not yet recorded
/// reached zero (``Checkpoint/keepsPlacement(of:from:)``):
/// that instant follows from the checkpoint alone, and every reader (the views too) computes the
/// same instant, which does not move.
struct ClocksNow: Sendable {
    /// The three clocks now.
    var clocks: StoreTime
    /// The checkpoint the clocks were extrapolated from.
    var base: Checkpoint
    /// Whether the active timeline advances now: the host is not suspended and the lease is live.
    var ticking: Bool

    /// Whether this write left the checkpoint behind because expiries still to record would
    /// have been placed elsewhere from the moved one (see ``Checkpoint/keepsPlacement(of:from:)``).
    var checkpointBehindBacklog = false

    /// The reading of the clocks this instant was extrapolated to, where a write read them.
    var reading: ClockReading?

    /// Throws ``CheckpointBehindBacklog`` when this write left the checkpoint behind: for writes
    /// that change the checkpoint themselves (suspending, calibrating), which must start from now.
    func requireCheckpointAtNow() throws {
        if checkpointBehindBacklog { throw CheckpointBehindBacklog() }
    }

    init(_ clocks: StoreTime, base: Checkpoint, ticking: Bool) {
        self.clocks = clocks
        self.base = base
        self.ticking = ticking
    }

    /// W now.
    var wall: Int64 { clocks.wall }
    /// A now.
    var active: Int64 { clocks.active }
    /// G now.
    var gap: Int64 { clocks.gap }

    /// The item timeline of `policy` now.
    func timeline(_ policy: CountdownPolicy) -> Int64 { clocks.timeline(policy) }

    /// How far ahead of the `policy` timeline now an item started now starts on it: the time W
    /// now runs ahead of where the checkpoint places the timeline now, and zero almost always.
    ///
    /// W runs ahead when this process's floor holds it above a reading that fell behind an
    /// earlier one (another server's clock read less precisely, a checkpoint moved on another
    /// host's reading). Started at the timeline now, a countdown would be placed to end before
    /// `started_at` plus its duration; started this much later on its timeline, it ends exactly
    /// there, never earlier than its duration after its recorded start. A checkpoint that slews
    /// (after a calibration) places W on its own and gives no delay: durations do not move.
    func startDelay(_ policy: CountdownPolicy) -> Int64 {
        if policy == .active && !ticking { return 0 }
        let sinceBase = timeline(policy) - base.timeline(policy)
        guard sinceBase >= 0, base.wall(after: sinceBase) < wall else { return 0 }
        // The least time since the checkpoint at which it places W now (see `Checkpoint.wall(after:)`).
        let reaching = min(wall - base.heartbeatAt, 2 * (wall - base.wallFloor))
        return max(0, reaching - sinceBase)
    }

    /// The instant on the store wall clock at which the `policy` timeline reads `value`; `nil`
    /// for an `active` timeline that stands still (nobody ticks) and has not reached it.
    ///
    /// An `active` timeline that stands still now may still have reached `value` since the
    /// checkpoint, before the lease ran out. It got there while ticking, so it is placed as if
    /// ticking.
    func wall(when policy: CountdownPolicy, reaches value: Int64) -> Int64? {
        let sinceBase = value - (policy == .wall ? base.active + base.gap : base.active)
        // Before the checkpoint (a store written by an older version).
        if sinceBase < 0 { return base.heartbeatAt + sinceBase }
        if policy == .active && !ticking && value > clocks.active { return nil }
        return base.wall(after: sinceBase)
    }
}
