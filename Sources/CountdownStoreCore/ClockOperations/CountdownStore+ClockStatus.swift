import Foundation

/// The store's clock state as persisted, for diagnostics (`countdown doctor`).
public struct ClockStatus: Sendable, Hashable {
    /// The clocks now.
    public var now: StoreTime
    /// When the store was created, on its wall clock.
    public var createdAt: Date
    /// The last checkpoint (heartbeat) of the clocks, on the store wall clock.
    public var lastHeartbeat: Date
    /// The boot the last checkpoint was taken in, if the platform tells.
    public var bootIdentity: String?
    /// Trusted time minus the system clock, set by ``CountdownStore/calibrate(serverTime:force:)``.
    public var calibrationOffset: Duration
    /// When the store was last calibrated.
    public var calibratedAt: Date?
    /// (System clock + calibration offset) − store wall clock, as last measured: non-zero after
    /// an edit of the system clock that the store refused to follow.
    public var clockSkew: Duration
    /// Whether the host said it is suspended.
    public var suspended: Bool
    /// The instance holding the lease, if its lease is live.
    public var leaseHolder: String?
    /// When that lease runs out.
    public var leaseExpiresAt: Date?
}

extension CountdownStore {
    /// The store's clocks now.
    public func now() async throws(CountdownError) -> StoreTime {
        try await reading { _, now in now.clocks }
    }

    /// The persisted clock state and lease, with the clocks extrapolated to now.
    public func clockStatus() async throws(CountdownError) -> ClockStatus {
        try await reading { tx, now in
            let time = now.clocks
            guard let checkpoint = try tx.checkpoint() else {
                throw CountdownError(.unreadableDatabase, "the countdown_clock row is missing")
            }
            let lease = try tx.lease()
            let live = lease.holder != nil && lease.expiresAtMs > time.wall
            return ClockStatus(
                now: time, createdAt: Date(millisecondsSince1970: checkpoint.createdAt),
                lastHeartbeat: Date(millisecondsSince1970: checkpoint.heartbeatAt), bootIdentity: checkpoint.bootID,
                calibrationOffset: .milliseconds(checkpoint.calibrationOffset),
                calibratedAt: checkpoint.calibratedAt.map(Date.init(millisecondsSince1970:)),
                clockSkew: .milliseconds(checkpoint.clockSkew), suspended: checkpoint.suspended,
                leaseHolder: live ? lease.holder : nil,
                leaseExpiresAt: live ? Date(millisecondsSince1970: lease.expiresAtMs) : nil)
        }
    }
}
