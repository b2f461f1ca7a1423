import Foundation

/// How long the ticker's expiry batches of a backlog take, and so how big the next one may be
/// to end by the next deadline of a group with no backlog of its own.
///
/// A batch costs a part that does not depend on its size (its reads of the due groups, its round
/// trips, its commit) and a part for each countdown it records. A batch cut to the time left at
/// the pace of whole batches alone overshoots by the first part; where that part is most of a
/// short batch (a server's round trips), no batch ends in time, and waiting for the deadline
/// instead loses less than the countdown would wait.
struct BacklogPace {
    /// What a batch costs whatever its size, in ms: the shortest batch of the backlog so far.
    private(set) var fixedMs: Double?
    /// What each countdown adds to a batch, in ms, from the last batch of at least
    /// ``paceBatch`` beyond the fixed part (a smaller one is mostly its fixed part); 0 while
    /// every batch took the same time.
    private(set) var perItemMs: Double = 0
    /// The pace of the last batch as a whole, in ms a countdown.
    private(set) var paceMs: Double = 0
    /// The time from deciding the next batch to its start, in ms (the pause for other writers,
    /// the engine's upkeep, a read of the next deadline), as last seen.
    private(set) var gapMs: Double = 0

    /// What the ticker does next in a backlog.
    enum Next: Equatable {
        /// Records at most this many.
        case batch(Int)
        /// Waits until this boot-clock instant (the next deadline of a quiet group), then
        /// records: no batch would end by then.
        case holdUntil(Int64)
    }

    /// How much longer than expected a batch cut to end by a deadline is planned to take.
    static let margin = 1.5

    /// The least batch whose time tells what each countdown adds.
    static let paceBatch = 100

    /// How far past the deadline a batch may end and still be started rather than waited for, ms.
    static let toleranceMs = 2.0

    /// The boot-clock instant of the last small batch taken after a quiet group's deadline.
    private(set) var lastSmallBoot: Int64?
    /// The share of a backlog's time that its small batches after quiet groups' deadlines may
    /// take (the drain keeps the rest).
    static let smallBatchShare = 0.1

    /// Notes a batch of `count` expiries that took `ms` (1 ms at least: a clock that did not
    /// move, as a test's virtual clock, counts as one).
    mutating func observe(_ count: Int, tookMs ms: Int64) {
        guard count > 0 else { return }
        let took = Double(max(1, ms))
        let fixed = min(fixedMs ?? took, took)
        fixedMs = fixed
        if count >= Self.paceBatch || perItemMs == 0 { perItemMs = (took - fixed) / Double(count) }
        paceMs = took / Double(count)
    }

    /// Notes that a batch started `ms` after it was decided.
    mutating func observeGap(_ ms: Int64) {
        gapMs = Double(max(0, ms))
    }

    /// The time a batch of `count` is expected to take, in ms.
    func expectedMs(_ count: Int) -> Double {
        (fixedMs ?? 0) + perItemMs * Double(count)
    }

    /// The limit of the first batch after a quiet group's deadline: `least`, so that the
    /// countdown commits (and reaches its reader) a fixed part's time after its deadline rather
    /// than a whole batch's; `batch` when the small batches since the last would take more than
    /// their share of the time.
    mutating func firstAfterDeadline(batch: Int, least: Int, now: Int64) -> Int {
        let small = min(least, batch)
        if let last = lastSmallBoot, Double(now - last) * Self.smallBatchShare < expectedMs(small) { return batch }
        lastSmallBoot = now
        return small
    }

    /// The next step of a backlog whose batches grow to `batch`, of `least` at the least (a cut
    /// batch must still do some work), at boot-clock instant `now`, when the soonest deadline of
    /// a quiet group comes at `quietDeadline` (`nil`: none ahead).
    func next(batch: Int, least: Int, now: Int64, quietDeadline: Int64?) -> Next {
        guard let quiet = quietDeadline, quiet > now, paceMs > 0 else { return .batch(batch) }
        // Batches of one size take a fifth more or less from one to the next (the server's
        // other work): planned with a margin, the batch ends by the deadline all the same.
        let left = (Double(quiet - now) - gapMs + Self.toleranceMs) / Self.margin
        let least = min(least, batch)
        if expectedMs(least) > left { return .holdUntil(quiet) }
        // While every batch took the same time, the pace of a whole one is all there is to go by.
        let fits =
            perItemMs > 0 ? Int((left - (fixedMs ?? 0)) / perItemMs) : Int(Double(quiet - now) / paceMs)
        return .batch(max(least, min(batch, fits)))
    }
}
