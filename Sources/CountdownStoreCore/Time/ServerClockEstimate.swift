import Foundation

/// The estimate of a database server's clock between two readings of it: the last reading plus
/// the time this host's boot clock measured since. An engine whose wall clock is its server's
/// (a server, shared by hosts on several machines) supplies the readings; the time logic
/// (where a reading falls, what a stepped server clock means) is here.
package final class ServerClockEstimate: @unchecked Sendable {
    // Safe: `sample` is only reached under `lock`.
    private let lock = NSLock()
    private var sample: (server: Int64, boot: Int64)?
    private var precise: (server: Int64, boot: Int64, uncertainty: Int64)?

    /// How much the server's clock may drift against this host's boot clock, per millisecond
    /// measured: one part in a thousand, above what NTP slews a clock by.
    private static let driftPerMillisecond = 0.001

    /// An estimate with no reading yet.
    package init() {}

    /// Records a reading of the server's clock (`server`, already corrected for a recorded skew)
    /// taken at `boot` on this host's boot clock.
    package func record(server: Int64, boot: Int64) {
        lock.withLock { sample = (server, boot) }
    }

    /// The server's clock (corrected for the recorded skew) at `boot`, extrapolated on this
    /// host's boot clock from the last reading; `nil` before the first.
    package func predicted(boot: Int64) -> Int64? {
        lock.withLock { sample.map { $0.server + (boot - $0.boot) } }
    }

    /// A reading of the server's clock, `server` at `boot` to within `uncertainty`, made as
    /// precise as the readings before it allow: when an earlier reading, carried to `boot` on
    /// this host's boot clock, is more precise and agrees with this one, it is the estimate.
    ///
    /// A reading's uncertainty is half its round trip, and a round trip is slow exactly when the
    /// database is (a failover, a partition healing, a lock held). Taken as it is, such a reading
    /// would move the skew the lease holder records by up to that much, and with it every other
    /// host's W. A reading that disagrees with the estimate beyond both uncertainties (another
    /// server after a failover, a clock stepped) replaces it.
    package func filtered(server: Int64, boot: Int64, uncertainty: Int64) -> (server: Int64, uncertainty: Int64) {
        lock.withLock {
            if let precise, boot >= precise.boot {
                let age = boot - precise.boot
                let carried = precise.uncertainty + Int64((Double(age) * Self.driftPerMillisecond).rounded(.up))
                let estimate = precise.server + age
                if carried < uncertainty && abs(server - estimate) <= uncertainty + carried {
                    return (estimate, carried)
                }
            }
            precise = (server, boot, uncertainty)
            return (server, uncertainty)
        }
    }

    /// `local` with the estimated server clock in place of the system clock: for reads that
    /// take no reading of their own.
    package func reading(local: ClockReading, bootScope: String) -> ClockReading {
        ClockReading(system: predicted(boot: local.boot) ?? local.system, boot: local.boot, bootID: bootScope)
    }

    /// The store's clock reading from a reading of the server's clock, `server`, placed at
    /// `boot` on this host's boot clock to within `uncertainty`.
    ///
    /// A checkpoint this host wrote (its boot ID is `bootScope`) is extrapolated on this host's
    /// boot clock, and the server's clock only tells how far the system clock has moved (a clock
    /// event). Any other is read on the server's clock less the skew the lease holder recorded
    /// when the server's clock was moved. When the server's clock stepped by more than
    /// `stepTolerance` (plus the uncertainty) and the holder has not recorded it yet, this host
    /// counts on its boot clock from the last reading, as the holder does, until it does.
    ///
    /// `floor` is the system clock a write of the store already used (its last event's instant,
    /// less the calibration offset), given only while no host holds a live lease: on another
    /// host's checkpoint, a reading behind it comes from a clock stepped back while no host
    /// counted, since writers leave the checkpoint behind. This host then counts on its boot
    /// clock from that instant, so that now is never placed before what a write stored and time
    /// goes on, until a holder records the step.
    package func reading(
        server: Int64, boot: Int64, uncertainty: Int64, checkpoint: Checkpoint?, bootScope: String,
        stepTolerance: Int64, floor: Int64? = nil
    ) -> ClockReading {
        let own = checkpoint?.bootID == bootScope
        let skew = checkpoint?.clockSkew ?? 0
        var corrected = server - (own ? 0 : skew)
        if !own, let predicted = predicted(boot: boot), abs(corrected - predicted) > stepTolerance + uncertainty {
            corrected = predicted
        } else {
            record(server: server - skew, boot: boot)
        }
        if !own, let floor, corrected < floor {
            corrected = floor
            record(server: floor, boot: boot)
        }
        return ClockReading(system: corrected, boot: boot, bootID: bootScope, uncertainty: uncertainty)
    }

    /// How far the server's clock (with the calibration offset) was ahead of the store wall clock
    /// `wall` when it read `server`: the skew a checkpoint at that reading records, so that hosts
    /// reading the server's clock less it agree with the holder counting on its boot clock.
    package static func skew(server: Int64, calibrationOffset: Int64, wall: Int64) -> Int64 {
        server + calibrationOffset - wall
    }
}
