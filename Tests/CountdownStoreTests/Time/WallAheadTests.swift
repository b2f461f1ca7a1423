import Foundation
import Testing

@testable import CountdownStoreCore

/// W held ahead of the timeline by a process's floor: what hosts sharing a PostgreSQL store see
/// when one reads the server's clock less precisely than before, or a new lease holder's reading
/// falls behind the W other hosts already handed out. Every countdown started then must still be
/// placed to end at or after its recorded start plus its duration, the checkpoint must not slew
/// for such a reading, and a slow reading of the server's clock must not move the estimate.
@Suite("W ahead of the timeline")
struct WallAheadTests {
    /// A checkpoint at W = 1,000,000 with A + G = 5,000, taken in boot "b" at boot clock 0.
    static let base = Checkpoint(
        createdAt: 900_000, active: 3_000, gap: 2_000, heartbeatAt: 1_000_000, heartbeatBoot: 0, bootID: "b",
        wallFloor: 1_000_000, suspended: false, calibrationOffset: 0, calibratedAt: nil, clockSkew: 0)

    /// The checkpoint extrapolated `ms` later in its own boot, with a live lease.
    static func extrapolation(after ms: Int64, from checkpoint: Checkpoint = base) -> Extrapolation {
        checkpoint.extrapolate(
            to: ClockReading(system: checkpoint.heartbeatAt + ms, boot: checkpoint.heartbeatBoot + ms, bootID: "b"),
            leaseExpiresAt: .max)
    }

    static func countdown(durationMs: Int64, policy: CountdownPolicy = .wall, at now: ClocksNow) -> ItemRecord {
        ItemRecord(
            key: "k", group: nil, kind: .countdown, policy: policy, durationMs: durationMs, payload: nil,
            generation: 1, at: now)
    }

    @Test("A countdown started while the floor holds W ahead ends at its start plus its duration", arguments: CountdownPolicy.allCases)
    func startedWhileAhead(policy: CountdownPolicy) {
        // The process handed out W = 1,000,700 and the timeline 5,700 earlier; the checkpoint
        // now read places the timeline 300 ms later at W = 1,000,300: W is held 400 ms ahead.
        let reading = Self.extrapolation(after: 300).time
        let floor = StoreTime(wall: 1_000_700, active: 3_000, gap: 2_000)
        let raised = reading.notBelow(floor)
        #expect(raised.wall == 1_000_700 && raised.timeline(.wall) == 5_300)
        let now = ClocksNow(raised, base: Self.base, ticking: true)
        #expect(now.startDelay(policy) == 400)

        let item = Self.countdown(durationMs: 60_000, policy: policy, at: now)
        #expect(item.startedAtMs == 1_000_700)
        let deadlineAt = now.wall(when: policy, reaches: item.deadlineMs!)
        #expect(deadlineAt == item.startedAtMs + 60_000)
        // It shows its whole duration until W moves past its start, then counts down with W.
        #expect(item.remainingMs(at: now) == 60_000)
        let later = ClocksNow(Self.extrapolation(after: 1_700).time, base: Self.base, ticking: true)
        #expect(later.wall == 1_001_700)
        #expect(item.remainingMs(at: later) == 59_000)
    }

    @Test("Without a floor ahead, or while a calibration slews W, nothing is delayed")
    func noDelayOtherwise() {
        let now = ClocksNow(Self.extrapolation(after: 300).time, base: Self.base, ticking: true)
        #expect(now.startDelay(.wall) == 0 && now.startDelay(.active) == 0)

        // A calibration 2 s back: W advances at half speed from 1,002,000 while the timelines
        // keep their pace; durations do not move.
        var slewing = Self.base
        slewing.wallFloor = 1_002_000
        let duringSlew = ClocksNow(Self.extrapolation(after: 1_000, from: slewing).time, base: slewing, ticking: true)
        #expect(duringSlew.wall == 1_002_500)
        #expect(duringSlew.startDelay(.wall) == 0)
        let item = Self.countdown(durationMs: 60_000, at: duringSlew)
        #expect(item.remainingMs(at: duringSlew) == 60_000 && item.deadlineMs == 6_000 + 60_000)

        // An `active` countdown started while nobody ticks is not placed on W at all.
        let still = ClocksNow(StoreTime(wall: 1_000_700, active: 3_000, gap: 2_300), base: Self.base, ticking: false)
        #expect(still.startDelay(.active) == 0)
    }

    @Test("A checkpoint moved by a process whose floor is ahead keeps W and the wall timeline in step, without a slew")
    func checkpointKeepsItsLine() {
        let extrapolation = Self.extrapolation(after: 300)
        let reading = ClockReading(system: 1_000_300, boot: 300, bootID: "b")
        for floor in [
            StoreTime(wall: 1_000_700, active: 3_000, gap: 2_000),  // W ahead
            StoreTime(wall: 1_000_100, active: 3_000, gap: 2_600),  // the timeline ahead
            StoreTime(wall: 1_000_900, active: 3_000, gap: 2_800),  // both, on another line
        ] {
            let time = extrapolation.time.notBelow(floor)
            let next = Self.base.advanced(to: time, from: extrapolation, at: reading)
            #expect(next.wallFloor <= next.heartbeatAt, "slews after \(floor)")
            #expect(next.heartbeatAt >= time.wall, "W at the checkpoint is behind the W handed out after \(floor)")
            #expect(
                next.heartbeatAt - next.timeline(.wall) >= Self.base.heartbeatAt - Self.base.timeline(.wall),
                "the line went back after \(floor)")
            #expect(next.timeline(.wall) == time.timeline(.wall) && next.active == time.active)
        }
        // With no floor ahead the checkpoint is the reading's, as it always was.
        let plain = Self.base.advanced(to: extrapolation.time, from: extrapolation, at: reading)
        #expect(plain.heartbeatAt == 1_000_300 && plain.timeline(.wall) == 5_300 && plain.wallFloor == 1_000_300)
    }

    @Test("A slow reading of the server's clock does not move the estimate; a disagreeing one replaces it")
    func serverClockReadingsAreFiltered() {
        let estimate = ServerClockEstimate()
        // A precise reading: the server at 50,000 at boot 1,000, to within 1 ms.
        #expect(estimate.filtered(server: 50_000, boot: 1_000, uncertainty: 1) == (50_000, 1))
        // Ten seconds later, a round trip of 800 ms placed the server 370 ms late: the earlier
        // reading, carried on the boot clock, is the estimate (1 ms plus 10 ms of allowed drift).
        #expect(estimate.filtered(server: 60_370, boot: 11_000, uncertainty: 400) == (60_000, 11))
        // A precise reading replaces it, even when it moved a little.
        #expect(estimate.filtered(server: 60_004, boot: 11_000, uncertainty: 2) == (60_004, 2))
        // Another server after a failover, 2 s off: taken, however slow, since nothing agrees with it.
        #expect(estimate.filtered(server: 62_100, boot: 11_100, uncertainty: 300) == (62_100, 300))
        // A reading as precise as the carried estimate is taken as it is.
        #expect(estimate.filtered(server: 62_200, boot: 11_200, uncertainty: 300) == (62_200, 300))
    }
}
