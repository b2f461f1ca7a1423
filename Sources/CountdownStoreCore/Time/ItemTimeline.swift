import Foundation

/// Elapsed and remaining time of one item (SPEC section 3), and the changes that move it.
///
/// Each item runs on its own timeline: `A + G` for `wall`, `A` for `active`. On it:
/// `elapsed = timeline − start − paused`, and a countdown is due when the timeline reaches
/// `deadline = start + paused + duration`, where `start = startOffset (+ gapAtStart for wall)`.
/// The same formulas are written in SQL in `Migrations/sqlite/0004_expiry_at_query_time.sql`.
extension ItemRecord {
    /// A new running item started at `time`.
    init(
        key: String, group: String?, kind: CountdownKind, policy: CountdownPolicy,
        durationMs: Int64?, payload: CountdownPayload?, generation: Int64, at time: some ClockInstant
    ) {
        // The delay lands on the part of the start its policy counts: A for `active`, G for `wall`.
        let delay = time.startDelay(policy)
        self.init(
            id: nil, key: key, group: group, kind: kind, policy: policy, state: .running,
            durationMs: durationMs, generation: generation,
            startOffsetMs: time.active + (policy == .active ? delay : 0),
            gapAtStartMs: time.gap + (policy == .wall ? delay : 0), startedAtMs: time.wall,
            pausedMs: 0, pausedAtMs: nil, deadlineMs: nil, finalElapsedMs: nil,
            endedAtMs: nil, expiredAtMs: nil, payload: payload, updatedAtMs: time.wall)
        deadlineMs = durationMs.map { startOnTimeline + $0 }
    }

    /// Where the item started on its own timeline.
    var startOnTimeline: Int64 {
        startOffsetMs + (policy == .wall ? gapAtStartMs : 0)
    }

    /// Elapsed time before clamping: it can exceed the duration of a due countdown not yet expired.
    func rawElapsedMs(at time: some ClockInstant) -> Int64 {
        switch state {
        case .running: time.timeline(policy) - startOnTimeline - pausedMs
        case .paused: (pausedAtMs ?? time.timeline(policy)) - startOnTimeline - pausedMs
        case .expired, .cancelled: finalElapsedMs ?? 0
        }
    }

    /// Elapsed time, never negative, at most the duration of a countdown.
    func elapsedMs(at time: some ClockInstant) -> Int64 {
        let elapsed = max(0, rawElapsedMs(at: time))
        return durationMs.map { min(elapsed, $0) } ?? elapsed
    }

    /// Remaining time of a countdown, never negative; nil for a stopwatch.
    func remainingMs(at time: some ClockInstant) -> Int64? {
        durationMs.map { $0 - elapsedMs(at: time) }
    }

    /// Remaining time used for ordering: negative for a countdown past due.
    func sortRemainingMs(at time: some ClockInstant) -> Int64 {
        switch state {
        case .running: (deadlineMs ?? .max) - time.timeline(policy)
        case .paused: (deadlineMs ?? .max) - (pausedAtMs ?? 0)
        case .expired, .cancelled: 0
        }
    }

    /// Whether a running countdown has reached its deadline at `time`: from that instant it is
    /// expired for every reader, whether or not its expiry has been recorded yet.
    func isDue(at time: some ClockInstant) -> Bool {
        guard state == .running, let deadlineMs else { return false }
        return time.timeline(policy) >= deadlineMs
    }

    /// The instant on the store wall clock at which a due countdown reached zero: placed from the
    /// checkpoint, never later than now, and never before the change that set its deadline (a
    /// countdown shortened past zero, or restarted with nothing to run, reached zero then).
    func dueAtMs(at now: ClocksNow) -> Int64 {
        guard let deadlineMs else { return now.wall }
        return max(updatedAtMs, min(now.wall, now.wall(when: policy, reaches: deadlineMs) ?? now.wall))
    }

    /// The public value of this item at `now`. A countdown that has reached zero is expired,
    /// with the instant it reached zero, even before its expiry is recorded.
    func countdown(at now: ClocksNow) -> Countdown {
        // Past its deadline, elapsed is already the duration and remaining zero; only the state
        // and the instants differ from what is recorded.
        let dueAt = isDue(at: now) ? dueAtMs(at: now) : nil
        let deadlineAt: Int64? =
            switch state {
            case .running: dueAt ?? deadlineMs.flatMap { now.wall(when: policy, reaches: $0) }
            case .expired: expiredAtMs
            case .paused, .cancelled: nil
            }
        return Countdown(
            key: key, group: group, kind: kind, policy: policy, state: dueAt == nil ? state : .expired,
            duration: durationMs.map(Duration.init(ms:)),
            elapsed: Duration(ms: elapsedMs(at: now)),
            remaining: remainingMs(at: now).map(Duration.init(ms:)),
            startedAt: Date(millisecondsSince1970: startedAtMs),
            deadlineAt: deadlineAt.map(Date.init(millisecondsSince1970:)),
            expiredAt: (dueAt ?? expiredAtMs).map(Date.init(millisecondsSince1970:)),
            generation: generation, payload: payload, computedAt: now.clocks, rule: rule,
            maxWait: maxWaitMs.map(Duration.init(ms:)),
            boundAt: dueAt == nil && state == .running
                ? boundAtMs(at: now).map(Date.init(millisecondsSince1970:)) : nil)
    }

    /// Where a debounced countdown's bound lies on its own timeline: its maximum wait after its
    /// start, moved later by its pauses; its deadline never passes it.
    var boundOnTimeline: Int64? {
        maxWaitMs.map { startOnTimeline + pausedMs + $0 }
    }

    /// The instant on the store wall clock at which a running debounced countdown reaches its
    /// bound (`nil` for an `active` one while no ticker runs, and for any other item).
    func boundAtMs(at now: ClocksNow) -> Int64? {
        boundOnTimeline.flatMap { now.wall(when: policy, reaches: $0) }
    }

    // MARK: - Changes

    mutating func pause(at time: some ClockInstant) {
        state = .paused
        pausedAtMs = time.timeline(policy)
        updatedAtMs = time.wall
    }

    mutating func resume(at time: some ClockInstant) {
        if let pausedAtMs { pausedMs += time.timeline(policy) - pausedAtMs }
        pausedAtMs = nil
        state = .running
        deadlineMs = durationMs.map { startOnTimeline + pausedMs + $0 }
        updatedAtMs = time.wall
    }

    mutating func cancel(at time: some ClockInstant) {
        finalElapsedMs = elapsedMs(at: time)
        end(.cancelled, at: time)
    }

    /// Marks a countdown expired, recorded at `now`: its expiry instant is the one at which it
    /// reached zero. Returns that instant and how late the record is on the item's own timeline.
    mutating func expire(at now: ClocksNow) -> (deadlineAtMs: Int64, lateMs: Int64) {
        let lateMs = max(0, state == .running ? now.timeline(policy) - (deadlineMs ?? now.timeline(policy)) : 0)
        let dueAt = state == .running ? dueAtMs(at: now) : now.wall
        finalElapsedMs = durationMs
        expiredAtMs = dueAt
        end(.expired, at: now)
        return (dueAt, lateMs)
    }

    private mutating func end(_ state: CountdownState, at time: some ClockInstant) {
        self.state = state
        pausedAtMs = nil
        deadlineMs = nil
        endedAtMs = time.wall
        updatedAtMs = time.wall
    }

    /// Starts the item again from zero with the same duration and rule, in a new generation.
    mutating func restart(at time: some ClockInstant) {
        var restarted = ItemRecord(
            key: key, group: group, kind: kind, policy: policy, durationMs: durationMs,
            payload: payload, generation: generation + 1, at: time
        )
        restarted.rule = rule
        restarted.maxWaitMs = maxWaitMs
        self = restarted.with(id: id)
    }

    /// Sets an active countdown's duration to `newDurationMs` in the same generation, moving its
    /// deadline with it: a debounced countdown postponed by a call of its burst.
    mutating func postpone(toDurationMs newDurationMs: Int64, at time: some ClockInstant) {
        durationMs = newDurationMs
        if deadlineMs != nil { deadlineMs = startOnTimeline + pausedMs + newDurationMs }
        updatedAtMs = time.wall
    }

    /// Changes the duration of an active countdown by `deltaMs`, in a new generation.
    mutating func changeDuration(by deltaMs: Int64, at time: some ClockInstant) {
        durationMs = (durationMs ?? 0) + deltaMs
        if let deadlineMs { self.deadlineMs = deadlineMs + deltaMs }
        generation += 1
        updatedAtMs = time.wall
    }

    private func with(id: Int64?) -> ItemRecord {
        var copy = self
        copy.id = id
        return copy
    }
}
