import Testing

@testable import CountdownStoreCore

/// How the ticker cuts a backlog's batches to end by the next deadline of a quiet group, from
/// the batches it timed: a server's batches cost mostly round trips (a fixed part), a file's
/// mostly rows.
@Suite("Backlog pace")
struct BacklogPaceTests {
    /// A server's batches: 20 ms whatever the size, and 0.04 ms a countdown.
    static func serverPace() -> BacklogPace {
        var pace = BacklogPace()
        pace.observe(16, tookMs: 21)
        pace.observe(1000, tookMs: 60)
        return pace
    }

    @Test("A batch is cut to end by the deadline with a margin, its fixed part counted: not at the pace of a whole batch")
    func cutCountsTheFixedPart() {
        let pace = Self.serverPace()
        #expect(pace.fixedMs == 21)
        guard case .batch(let size) = pace.next(batch: 1000, least: 16, now: 0, quietDeadline: 40) else {
            Issue.record("a batch of 7 ms of work fits in 40 ms")
            return
        }
        // 42 ms (with the tolerance) over the margin of 1.5 is 28 ms; less the 21 ms every batch
        // costs, at 0.039 ms a countdown.
        #expect(size == 179)
        #expect(pace.expectedMs(size) * BacklogPace.margin <= 42)
        // At the pace of the whole batch (0.06 ms each) it would have been 666: 47 ms of work.
        #expect(pace.expectedMs(666) > 42)
    }

    @Test("The pause between a decision and its batch is counted: a deadline that leaves room for a batch only without it is waited for")
    func gapCounts() {
        var pace = Self.serverPace()
        #expect(pace.next(batch: 1000, least: 16, now: 0, quietDeadline: 40) == .batch(179))
        pace.observeGap(10)
        #expect(pace.next(batch: 1000, least: 16, now: 0, quietDeadline: 40) == .holdUntil(40))
    }

    @Test("When no batch would end by the deadline, the next one waits for it")
    func holdsForADeadlineNoBatchMeets() {
        let pace = Self.serverPace()
        #expect(pace.next(batch: 1000, least: 16, now: 100, quietDeadline: 110) == .holdUntil(110))
        // A deadline already past, or none ahead: a whole batch at once.
        #expect(pace.next(batch: 1000, least: 16, now: 100, quietDeadline: 100) == .batch(1000))
        #expect(pace.next(batch: 1000, least: 16, now: 100, quietDeadline: nil) == .batch(1000))
        // Far enough ahead: the whole batch.
        #expect(pace.next(batch: 1000, least: 16, now: 0, quietDeadline: 500) == .batch(1000))
    }

    @Test("A clock that did not move during the batches (virtual time) cuts at the pace of whole batches, and never waits")
    func virtualTime() {
        var pace = BacklogPace()
        pace.observe(100, tookMs: 0)
        pace.observe(200, tookMs: 0)
        #expect(pace.perItemMs == 0)
        #expect(pace.next(batch: 400, least: 16, now: 0, quietDeadline: 1) == .batch(200))
        #expect(pace.next(batch: 400, least: 16, now: 0, quietDeadline: 10) == .batch(400))
    }

    @Test("The first batch after a quiet group's deadline is small, as long as the small batches take a tenth of the time at most")
    func smallAfterDeadline() {
        var pace = Self.serverPace()
        // 21.6 ms for 16: the first one is small.
        #expect(pace.firstAfterDeadline(batch: 1000, least: 16, now: 1_000) == 16)
        // 50 ms later a small one would take more than a tenth of the time since the last.
        #expect(pace.firstAfterDeadline(batch: 1000, least: 16, now: 1_050) == 1000)
        // 250 ms later it takes less.
        #expect(pace.firstAfterDeadline(batch: 1000, least: 16, now: 1_250) == 16)
        // Never more than the batch.
        #expect(pace.firstAfterDeadline(batch: 8, least: 16, now: 5_000) == 8)
    }
}
