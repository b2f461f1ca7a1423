import Foundation

// Calibration: the store wall clock set to a trusted time, as an offset from the system clock.

extension CountdownStore {
    /// How far ahead of the store wall clock a calibration may move it without `force`: one day.
    public static let calibrationForwardLimit: Duration = .seconds(24 * 60 * 60)

    /// Sets the store wall clock to a trusted time (a server's), persisted as an offset from the
    /// system clock. Durations are unaffected: only instants move.
    ///
    /// The wall clock W never goes backwards. A server time behind W by more than
    /// ``Configuration/clockEditTolerance`` is refused unless `force` is set; with `force`, W
    /// advances at half speed from where it is until the trusted time catches up (twice as long
    /// as the difference), so instants written meanwhile stay distinct and ordered. Within the
    /// tolerance it does the same without `force`. A server time more than
    /// ``calibrationForwardLimit`` ahead of W is refused unless `force` is set too: moved there,
    /// W could only come back by waiting.
    ///
    /// - Parameters:
    ///   - serverTime: the trusted time now, between 1970 and 9999.
    ///   - force: accept a server time behind W, or more than a day ahead of it.
    /// - Returns: the store's clocks right after the calibration.
    /// - Throws: ``CountdownError/Code/invalidArgument`` for a time out of range, or one that
    ///   needs `force` without it (nothing is written then).
    @discardableResult
    public func calibrate(serverTime: Date, force: Bool = false) async throws(CountdownError) -> StoreTime {
        guard let serverMs = serverTime.checkedMillisecondsSince1970, serverMs >= 0, serverMs < 253_402_300_800_000
        else {
            throw CountdownError(
                .invalidArgument, "invalid server time \(serverTime.described): must be between 1970 and 9999")
        }
        let clock = configuration.clock
        let tolerance = configuration.clockEditTolerance.milliseconds
        let forwardLimit = Self.calibrationForwardLimit.milliseconds
        let time = try await writing(.calibrate) { tx, time in
            guard var checkpoint = try tx.checkpoint() else { return time.clocks }
            try time.requireCheckpointAtNow()
            let difference = serverMs - time.wall
            if !force && (difference < -tolerance || difference > forwardLimit) {
                throw CountdownError.calibrationNeedsForce(
                    serverMs: serverMs, wallMs: time.wall, differenceMs: difference)
            }
            let reading = try self.capabilities.clockReading(ClockReading(clock), in: tx)
            let previousOffset = checkpoint.calibrationOffset
            let shift = serverMs - checkpoint.heartbeatAt
            checkpoint.calibrationOffset = serverMs - reading.system
            checkpoint.calibratedAt = serverMs
            checkpoint.heartbeatAt = serverMs
            checkpoint.heartbeatBoot = reading.boot
            checkpoint.bootID = reading.bootID
            checkpoint.clockSkew = 0
            try tx.save(checkpoint, creating: false)
            var lease = try tx.lease()
            if lease.holder != nil {
                lease.expiresAtMs += shift  // the lease lasts as long as it did, on the moved clock
                try tx.save(lease)
            }
            let calibrated = StoreTime(wall: max(checkpoint.wallFloor, serverMs), active: time.active, gap: time.gap)
            try tx.append(
                EventRecord(
                    .calibrated, at: calibrated,
                    detail: [
                        "offset_ms": checkpoint.calibrationOffset, "previous_offset_ms": previousOffset,
                        "wall_before_ms": time.wall,
                    ]))
            try self.remember(tx)
            return calibrated
        }
        state.withLock { memory in
            // The wall clock may now legitimately read below the old floor's unfloored base; keep the floor itself.
            memory.floor = memory.floor.map { time.notBelow($0) } ?? time
        }
        return time
    }
}
