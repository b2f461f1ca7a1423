import Foundation

/// What ``CountdownStore/cooldown(_:duration:group:policy:payload:)`` found: whether the caller
/// may go ahead, or how long it must wait.
///
/// ```swift
/// switch try await store.cooldown("resend-code:\(phone)", duration: .seconds(60)) {
/// case .allowed:
///     try await sendCode(phone)
/// case .coolingDown(let remaining, _, _):
///     throw TooManyRequests(retryAfter: remaining)
/// }
/// ```
///
/// The article <doc:CooldownsAndDebounce> shows it in an HTTP route and in a shell script.
public enum CooldownOutcome: Sendable, Hashable {
    /// The key was not cooling down: its cooldown starts now. The countdown as started.
    case allowed(Countdown)
    /// The key is cooling down, and nothing changed: `remaining` is how long until it is over,
    /// `endsAt` when (`nil` while the cooldown is paused, or for an `active` one while no ticker
    /// runs); `countdown` is the running cooldown.
    case coolingDown(remaining: Duration, endsAt: Date?, countdown: Countdown)

    /// Whether the caller may go ahead.
    public var isAllowed: Bool {
        if case .allowed = self { return true }
        return false
    }

    /// Whole seconds until the cooldown is over, rounded up and at least 1, as an HTTP
    /// `Retry-After` header gives them; `nil` when the caller may go ahead.
    public var retryAfterSeconds: Int? {
        guard case .coolingDown(let remaining, _, _) = self else { return nil }
        let (seconds, attoseconds) = remaining.components
        return Int(max(1, seconds + (attoseconds > 0 ? 1 : 0)))
    }

    /// The key's cooldown: the one just started, or the one still running.
    public var countdown: Countdown {
        switch self {
        case .allowed(let countdown), .coolingDown(_, _, let countdown): countdown
        }
    }
}

extension CountdownStore {
    // MARK: - Cooldown

    /// Starts a cooldown of `duration` under `key` unless one is running, in one atomic write:
    /// the caller learns whether it may go ahead, or how long is left.
    ///
    /// When the key holds no active item (it is new, or its last cooldown has expired), the
    /// cooldown starts now and the outcome is ``CooldownOutcome/allowed(_:)``. While the key's
    /// cooldown is running or paused, nothing changes and the outcome is
    /// ``CooldownOutcome/coolingDown(remaining:endsAt:countdown:)``: its own duration, group and
    /// payload stay as the call that started it gave them. Callers racing for the same key, in
    /// one process or many, get exactly one `allowed`: the same as Redis's `SET key 1 NX EX`, with
    /// the time left queryable, pausable and visible in the store's tables.
    ///
    /// A cooldown is a countdown (its ``Countdown/rule`` is ``CountdownRule/cooldown``): it
    /// expires with an event, lists and counts as any countdown, and its policy says whether it
    /// counts while the host is down (``CountdownPolicy/wall``, the default). ``cancel(_:)`` or
    /// ``remove(_:)`` end it early; a plain ``start(_:duration:group:policy:payload:whenActive:)``
    /// treats it as any active countdown.
    ///
    /// - Throws: ``CountdownError`` for invalid input, or, with
    ///   ``CountdownError/Code/wrongState``, when the key holds an active item that is not a
    ///   cooldown (a plain countdown, a stopwatch, a debounce); nothing is written.
    public func cooldown(
        _ key: String, duration: Duration, group: String? = nil, policy: CountdownPolicy = .wall,
        payload: CountdownPayload? = nil
    ) async throws(CountdownError) -> CooldownOutcome {
        try await run(Self.cooldownPlan(key, duration: duration, group: group, policy: policy, payload: payload))
    }

    static func cooldownPlan(
        _ key: String, duration: Duration, group: String?, policy: CountdownPolicy, payload: CountdownPayload?
    ) throws(CountdownError) -> WritePlan<CooldownOutcome> {
        var request = try ValidRequest(
            .countdown(key, duration: duration, group: group, policy: policy, payload: payload))
        request.rule = .cooldown
        let asked = request
        return WritePlan(.cooldown) { tx, time in
            switch try Self.startOrFind(asked, tx, time, lastWrite: true) {
            case .started(let item):
                return .allowed(item.countdown(at: time))
            case .active(let existing):
                try Self.require(existing, holds: .cooldown, for: "cooldown")
                let countdown = existing.countdown(at: time)
                return .coolingDown(
                    remaining: countdown.remaining ?? .zero, endsAt: countdown.deadlineAt, countdown: countdown)
            }
        }
    }

    // MARK: - Debounce

    /// One call of a debounce under `key`: starts a countdown of `quiet` when the key holds no
    /// active item; while it is active, moves its deadline to `quiet` from now, but never past
    /// `maxWait` after the first call of the burst. It expires once per burst.
    ///
    /// Each burst is one generation: its first call starts the countdown (a `started` event, or
    /// `replaced` over an ended one), each later call that moves the deadline records a
    /// `postponed` event in the same generation, and the burst ends with one `expired` event when
    /// no call came for `quiet`, or at its bound. The next call starts a new burst in a new
    /// generation.
    ///
    /// ```swift
    /// // One "your cart changed" e-mail, 5 minutes after the last change, never more than 30
    /// // after the first.
    /// try await store.debounce(
    ///     "cart-mail:\(cart)", quiet: .seconds(300), maxWait: .seconds(1800), payload: .text(cart))
    /// ```
    ///
    /// The deadline never moves earlier: a later call with a shorter `quiet` leaves it where it
    /// is. The last call's payload wins (a call without one leaves the payload as it is). The
    /// burst keeps its first call's group, policy and maximum wait; a later call's apply from
    /// the next burst on. A debounced countdown is a countdown (its ``Countdown/rule`` is
    /// ``CountdownRule/debounce``, with ``Countdown/maxWait`` and ``Countdown/boundAt``): pausing
    /// stops its time and moves its bound later by the pause, and an `active` one counts only
    /// while a ticker runs. ``extend(_:by:)`` may not take it past its maximum wait.
    ///
    /// - Parameters:
    ///   - quiet: how long after the last call it expires, 1 ms to 100 years.
    ///   - maxWait: how long after the first call of a burst it expires at the latest (counted
    ///     time: pauses apart), at least `quiet`, at most 100 years.
    /// - Throws: ``CountdownError`` for invalid input (a maximum wait shorter than the quiet
    ///   period, among others), or, with ``CountdownError/Code/wrongState``, when the key holds an
    ///   active item that is not a debounce (a plain countdown, a stopwatch, a cooldown); nothing
    ///   is written.
    @discardableResult
    public func debounce(
        _ key: String, quiet: Duration, maxWait: Duration, group: String? = nil, policy: CountdownPolicy = .wall,
        payload: CountdownPayload? = nil
    ) async throws(CountdownError) -> Countdown {
        try await run(
            Self.debouncePlan(key, quiet: quiet, maxWait: maxWait, group: group, policy: policy, payload: payload))
    }

    static func debouncePlan(
        _ key: String, quiet: Duration, maxWait: Duration, group: String?, policy: CountdownPolicy,
        payload: CountdownPayload?
    ) throws(CountdownError) -> WritePlan<Countdown> {
        var request = try ValidRequest(.countdown(key, duration: quiet, group: group, policy: policy, payload: payload))
        let quietMs = request.durationMs ?? 0
        let maxWaitMs = try Validate.duration(maxWait, what: "maximum wait")
        guard maxWaitMs >= quietMs else {
            throw CountdownError(
                .invalidDuration,
                "invalid maximum wait \(DurationText.format(milliseconds: maxWaitMs)): shorter than the quiet period "
                    + "\(DurationText.format(milliseconds: quietMs))")
        }
        request.rule = .debounce
        request.maxWaitMs = maxWaitMs
        let asked = request
        return WritePlan(.debounce) { tx, time in
            switch try Self.startOrFind(asked, tx, time, lastWrite: true) {
            case .started(let item):
                return item.countdown(at: time)
            case .active(var item):
                try Self.require(item, holds: .debounce, for: "debounce")
                let bound = item.maxWaitMs ?? maxWaitMs
                let current = item.durationMs ?? 0
                let wanted = min(bound, max(current, max(0, item.rawElapsedMs(at: time)) + quietMs))
                let payloadChanged = asked.payload != nil && asked.payload != item.payload
                guard wanted != current || payloadChanged else { return item.countdown(at: time) }
                if let payload = asked.payload { item.payload = payload }
                item.postpone(toDurationMs: wanted, at: time)
                try tx.update(item)
                if wanted != current {
                    try tx.append(
                        EventRecord(
                            .postponed, item: item, at: time,
                            detail: ["by_ms": wanted - current, "duration_ms": wanted]))
                }
                return item.countdown(at: time)
            }
        }
    }

    /// Refuses a cooldown or a debounce on a key whose active item is not of its rule.
    static func require(_ item: ItemRecord, holds rule: CountdownRule, for verb: String) throws {
        guard item.rule != rule else { return }
        let holds =
            switch (item.kind, item.rule) {
            case (.stopwatch, _): "a stopwatch"
            case (_, .cooldown?): "a cooldown"
            case (_, .debounce?): "a debounced countdown"
            case (_, nil): "a plain countdown"
            }
        throw CountdownError(
            .wrongState,
            "cannot \(verb) \(quoted(item.key)): it holds \(holds), \(item.state.rawValue); "
                + "cancel or remove it first, or use another key")
    }
}
