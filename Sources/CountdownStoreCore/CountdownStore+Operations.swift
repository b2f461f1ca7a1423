import Foundation

/// What ``CountdownStore/start(_:duration:group:policy:payload:whenActive:)`` does when the key is
/// already running or paused.
public enum WhenActive: String, Sendable, Hashable, CaseIterable {
    /// Throw ``CountdownError/Code/alreadyActive``. The default.
    case refuse
    /// Start again from zero in a new generation; the old item's expiry is never delivered.
    case replace
    /// Leave the active item as it is and return it (registering twice is harmless).
    case keep
}

/// One item to start, for ``CountdownStore/start(_:whenActive:)``.
public struct CountdownRequest: Sendable, Hashable {
    /// The item's unique key.
    public var key: String
    /// The countdown's duration, or `nil` for a stopwatch.
    public var duration: Duration?
    /// The item's group, if any.
    public var group: String?
    /// Which time the item counts.
    public var policy: CountdownPolicy
    /// The caller's payload, if any.
    public var payload: CountdownPayload?

    /// A countdown of `duration`.
    public static func countdown(
        _ key: String, duration: Duration, group: String? = nil, policy: CountdownPolicy = .wall,
        payload: CountdownPayload? = nil
    ) -> CountdownRequest {
        CountdownRequest(key: key, duration: duration, group: group, policy: policy, payload: payload)
    }

    /// A stopwatch.
    public static func stopwatch(
        _ key: String, group: String? = nil, policy: CountdownPolicy = .wall, payload: CountdownPayload? = nil
    ) -> CountdownRequest {
        CountdownRequest(key: key, duration: nil, group: group, policy: policy, payload: payload)
    }
}

/// What ``CountdownStore/prune(olderThan:progress:)`` removed.
public struct PruneResult: Sendable, Hashable {
    /// Expired and cancelled items removed.
    public var items: Int
    /// Events removed (only those every named consumer that holds retention back has passed).
    public var events: Int
    /// Rows of `countdown_retired_keys` removed: keys gone for good, with no event left of them.
    public var retiredKeys: Int = 0

    /// A result with every count given.
    public init(items: Int, events: Int, retiredKeys: Int = 0) {
        self.items = items
        self.events = events
        self.retiredKeys = retiredKeys
    }
}

/// A request whose input has passed validation.
struct ValidRequest: Sendable {
    var key: String
    var durationMs: Int64?
    var group: String?
    var policy: CountdownPolicy
    var payload: CountdownPayload?
    /// The rule a cooldown or a debounce starts its countdown under.
    var rule: CountdownRule? = nil
    /// A debounce's maximum wait.
    var maxWaitMs: Int64? = nil

    init(_ request: CountdownRequest) throws(CountdownError) {
        key = try Validate.key(request.key)
        durationMs = try request.duration.map { (duration) throws(CountdownError) in try Validate.duration(duration) }
        group = try Validate.group(request.group)
        policy = request.policy
        payload = try Validate.payload(request.payload)
    }
}

extension CountdownStore {
    // MARK: - Starting

    /// Starts a countdown of `duration` (1 ms to 100 years) under `key`.
    ///
    /// One write transaction: the item row and its `started` event. The countdown counts from
    /// the store's clocks now (``StoreTime``); its deadline follows its policy.
    ///
    /// ```swift
    /// try await store.start("order-1042", duration: .seconds(15 * 60), group: "payments")
    /// ```
    ///
    /// - Parameters:
    ///   - key: the countdown's name, unique in the store: 1 to 256 bytes of UTF-8 (stored NFC),
    ///     no control characters.
    ///   - duration: how long it runs, 1 ms to 100 years, counted in whole milliseconds.
    ///   - group: an optional group to list and count it by (1 to 128 bytes of UTF-8).
    ///   - policy: whether it counts while the host is suspended or down (``CountdownPolicy/wall``,
    ///     the default) or only while a ticker runs (``CountdownPolicy/active``).
    ///   - payload: optional data (at most 64 KiB) handed back with the item and its expiry event.
    ///   - whenActive: what to do when `key` is already running or paused; by default, refuse.
    /// - Returns: the item as started (or the active one, with ``WhenActive/keep``).
    /// - Throws: ``CountdownError`` for invalid input (nothing is written) or an active key.
    @discardableResult
    public func start(
        _ key: String, duration: Duration, group: String? = nil, policy: CountdownPolicy = .wall,
        payload: CountdownPayload? = nil, whenActive: WhenActive = .refuse
    ) async throws(CountdownError) -> Countdown {
        try await run(
            Self.startPlan(
                key, duration: duration, group: group, policy: policy, payload: payload, whenActive: whenActive))
    }

    static func startPlan(
        _ key: String, duration: Duration, group: String?, policy: CountdownPolicy, payload: CountdownPayload?,
        whenActive: WhenActive
    ) throws(CountdownError) -> WritePlan<Countdown> {
        let request = try ValidRequest(
            .countdown(key, duration: duration, group: group, policy: policy, payload: payload))
        return WritePlan(.start, start: Self.groupedStart(request)) { tx, time in
            try Self.start(request, whenActive: whenActive, tx, time, lastWrite: true)
        }
    }

    /// Starts a countdown that reaches zero at `deadline` on the store wall clock (which follows
    /// ``calibrate(serverTime:force:)``): for deadlines a server hands out as instants.
    @discardableResult
    public func start(
        _ key: String, endingAt deadline: Date, group: String? = nil, policy: CountdownPolicy = .wall,
        payload: CountdownPayload? = nil, whenActive: WhenActive = .refuse
    ) async throws(CountdownError) -> Countdown {
        try await run(
            Self.startPlan(
                key, endingAt: deadline, group: group, policy: policy, payload: payload, whenActive: whenActive))
    }

    static func startPlan(
        _ key: String, endingAt deadline: Date, group: String?, policy: CountdownPolicy, payload: CountdownPayload?,
        whenActive: WhenActive
    ) throws(CountdownError) -> WritePlan<Countdown> {
        let request = try ValidRequest(.stopwatch(key, group: group, policy: policy, payload: payload))
        guard let deadlineMs = deadline.checkedMillisecondsSince1970 else {
            throw CountdownError(.invalidArgument, "invalid deadline \(deadline.described)")
        }
        return WritePlan(.start) { tx, time in
            let remaining = deadlineMs - time.wall
            guard remaining >= Validate.minimumDurationMs, remaining <= Validate.maximumDurationMs else {
                throw CountdownError(
                    .invalidDuration,
                    "invalid deadline \(deadline.described): it is \(DurationText.format(milliseconds: remaining)) "
                        + "from now; must be between 1ms and 100 years ahead"
                )
            }
            var countdown = request
            countdown.durationMs = remaining
            return try Self.start(countdown, whenActive: whenActive, tx, time, lastWrite: true)
        }
    }

    /// Starts a stopwatch under `key`: it counts up from zero and never expires.
    @discardableResult
    public func startStopwatch(
        _ key: String, group: String? = nil, policy: CountdownPolicy = .wall, payload: CountdownPayload? = nil,
        whenActive: WhenActive = .refuse
    ) async throws(CountdownError) -> Countdown {
        try await run(Self.stopwatchPlan(key, group: group, policy: policy, payload: payload, whenActive: whenActive))
    }

    static func stopwatchPlan(
        _ key: String, group: String?, policy: CountdownPolicy, payload: CountdownPayload?, whenActive: WhenActive
    ) throws(CountdownError) -> WritePlan<Countdown> {
        let request = try ValidRequest(.stopwatch(key, group: group, policy: policy, payload: payload))
        return WritePlan(.start, start: Self.groupedStart(request)) { tx, time in
            try Self.start(request, whenActive: whenActive, tx, time, lastWrite: true)
        }
    }

    /// Starts many items in one transaction: all of them, or none when any input is refused.
    ///
    /// - Throws: ``CountdownError`` naming the first bad request, a key repeated within the
    ///   batch, or (with ``WhenActive/refuse``) a key already active.
    @discardableResult
    public func start(
        _ requests: [CountdownRequest], whenActive: WhenActive = .refuse
    ) async throws(CountdownError) -> [Countdown] {
        try await run(Self.startPlan(requests, whenActive: whenActive))
    }

    static func startPlan(
        _ requests: [CountdownRequest], whenActive: WhenActive
    ) throws(CountdownError) -> WritePlan<[Countdown]> {
        var valid: [ValidRequest] = []
        valid.reserveCapacity(requests.count)
        var seen = Set<String>()
        for request in requests {
            let checked = try ValidRequest(request)
            guard seen.insert(checked.key).inserted else {
                throw CountdownError(.invalidArgument, "key \(quoted(checked.key)) appears twice in one batch")
            }
            valid.append(checked)
        }
        let batch = valid
        return WritePlan(.start, grouped: false) { tx, time in
            if let stored = tx.storedOperations {
                return try Self.storedStart(batch, whenActive: whenActive, stored, tx, time)
            }
            return try batch.indices.map { index in
                try Self.start(batch[index], whenActive: whenActive, tx, time, lastWrite: index == batch.count - 1)
            }
        }
    }

    /// The item `request` starts at `time`, before it is inserted (generation 1, no id yet).
    private static func newItem(_ request: ValidRequest, _ time: ClocksNow) -> ItemRecord {
        var item = ItemRecord(
            key: request.key, group: request.group, kind: request.durationMs == nil ? .stopwatch : .countdown,
            policy: request.policy, durationMs: request.durationMs, payload: request.payload, generation: 1, at: time)
        item.rule = request.rule
        item.maxWaitMs = request.maxWaitMs
        return item
    }

    /// What a start's event says besides its kind: the duration, and a debounce's maximum wait,
    /// as ``EventRecord``'s `detail` writes them (written here directly: a group commit makes
    /// one for each of its starts).
    private static func startDetail(_ item: ItemRecord) -> String? {
        guard let duration = item.durationMs else { return nil }
        guard let maxWait = item.maxWaitMs else { return "{\"duration_ms\":\(duration)}" }
        return "{\"duration_ms\":\(duration),\"max_wait_ms\":\(maxWait)}"
    }

    /// The event of a new key's start, once inserted.
    private static func startedEvent(_ inserted: ItemRecord, _ time: ClocksNow) -> EventRecord {
        var event = EventRecord(inserted.kind == .stopwatch ? .stopwatchStarted : .started, item: inserted, at: time)
        event.detail = startDetail(inserted)
        return event
    }

    /// How a group commit inserts `request` with the group's other new keys.
    private static func groupedStart(_ request: ValidRequest) -> GroupedStart {
        GroupedStart(
            key: request.key, item: { time in newItem(request, time) },
            event: { item, time in startedEvent(item, time) })
    }

    private static func start(
        _ request: ValidRequest, whenActive: WhenActive, _ tx: WriteTransaction, _ time: ClocksNow, lastWrite: Bool
    ) throws -> Countdown {
        if let stored = tx.storedOperations {
            let (outcome, item) = try storedStart(request, whenActive: whenActive, stored, tx, time)
            if outcome == "active" { throw alreadyActive(request.key, item) }
            return item.countdown(at: time)
        }
        switch try startOrFind(request, tx, time, lastWrite: lastWrite) {
        case .started(let item):
            return item.countdown(at: time)
        case .active(let existing):
            switch whenActive {
            case .refuse:
                throw alreadyActive(request.key, existing)
            case .keep:
                return existing.countdown(at: time)
            case .replace:
                return try replace(existing, with: request, tx, time).countdown(at: time)
            }
        }
    }

    /// The refusal of a start whose key's item is active.
    private static func alreadyActive(_ key: String, _ existing: ItemRecord) -> CountdownError {
        CountdownError(
            .alreadyActive, "countdown \(quoted(key)) is already \(existing.state.rawValue); ",
            hint: .startWhenActive(.replace), " to start it again")
    }

    /// Starts `request` with the engine's own operation: its outcome (`started`, `replaced`,
    /// `active` or `kept`) and the item it started or found.
    private static func storedStart(
        _ request: ValidRequest, whenActive: WhenActive, _ stored: any StoredOperations, _ tx: WriteTransaction,
        _ time: ClocksNow
    ) throws -> (String, ItemRecord) {
        let done = try stored.start(
            key: request.key, durationMs: request.durationMs, group: request.group, payload: request.payload,
            policy: request.policy, rule: request.rule, maxWaitMs: request.maxWaitMs,
            whenActive: whenActive.rawValue, at: OperationInstant(time))
        guard let item = done.item else {
            throw CountdownError(.storageFailure, "countdown \(quoted(request.key)) could be neither inserted nor read")
        }
        let event = storedStartEvent(done.outcome, item)
        tx.noteStored(item, events: storedEvents(item, event: event, lateMs: done.lateMs, time))
        return (done.outcome, item)
    }

    /// The event an engine's own start appended, by its outcome: none when it started nothing.
    static func storedStartEvent(_ outcome: String, _ item: ItemRecord) -> EventKind? {
        switch (outcome, item.kind) {
        case ("started", .stopwatch), ("replaced", .stopwatch): .stopwatchStarted
        case ("started", _): .started
        case ("replaced", _): .replaced
        default: nil
        }
    }

    /// Starts `batch` with the engine's own operation, 20,000 items to a call; an active key is
    /// refused, kept or replaced as `whenActive` says.
    private static func storedStart(
        _ batch: [ValidRequest], whenActive: WhenActive, _ stored: any StoredOperations, _ tx: WriteTransaction,
        _ time: ClocksNow
    ) throws -> [Countdown] {
        var started: [Countdown] = []
        started.reserveCapacity(batch.count)
        // In slices, each the engine's to send as it sees fit (in statements of its own size).
        for first in stride(from: 0, to: batch.count, by: 20_000) {
            let chunk = batch[first..<min(batch.count, first + 20_000)]
            let done = try stored.start(each: chunk.map { newItem($0, time) }, at: OperationInstant(time))
            for (request, outcome) in zip(chunk, done) {
                guard var item = outcome.item else {
                    throw CountdownError(
                        .storageFailure, "countdown \(quoted(request.key)) could be neither inserted nor read")
                }
                let event = storedStartEvent(outcome.outcome, item)
                tx.noteStored(item, events: storedEvents(item, event: event, lateMs: outcome.lateMs, time))
                if outcome.outcome == "kept" {
                    switch whenActive {
                    case .refuse: throw alreadyActive(request.key, item)
                    case .keep: break
                    case .replace: item = try storedStart(request, whenActive: .replace, stored, tx, time).1
                    }
                }
                started.append(item.countdown(at: time))
            }
        }
        return started
    }

    /// The events an engine's own operation appended, as the metrics count them: the expiry it
    /// recorded first (when `lateMs` says it did), then its own.
    static func storedEvents(_ item: ItemRecord, event: EventKind?, lateMs: Int64?, _ time: ClocksNow)
        -> [EventRecord]
    {
        var events: [EventRecord] = []
        if let lateMs { events.append(EventRecord(.expired, item: item, at: time, lateMs: lateMs)) }
        if let event { events.append(EventRecord(event, item: item, at: time)) }
        return events
    }

    /// What ``startOrFind(_:_:_:lastWrite:)`` did.
    enum StartOrFind {
        /// The key was new, or its item had ended: `request` started, in the item's next generation.
        case started(ItemRecord)
        /// The key's item is active (running or paused): nothing was written.
        case active(ItemRecord)
    }

    /// Starts `request` unless its key's item is active, which it returns as it is. A new key
    /// (the common case) is one statement with its event where the engine can; a removed key's
    /// generations never repeat; an ended item is replaced in its next generation.
    static func startOrFind(_ request: ValidRequest, _ tx: WriteTransaction, _ time: ClocksNow, lastWrite: Bool) throws
        -> StartOrFind
    {
        if let stored = tx.storedOperations {
            let (outcome, item) = try storedStart(request, whenActive: .keep, stored, tx, time)
            return outcome == "kept" ? .active(item) : .started(item)
        }
        var item = newItem(request, time)
        let inserted = try tx.insertNew(&item, lastWrite: lastWrite) { inserted in startedEvent(inserted, time) }
        if inserted { return .started(item) }
        guard let existing = try withDueExpiryRecorded(tx.item(key: request.key), tx, time) else {
            throw CountdownError(.storageFailure, "countdown \(quoted(request.key)) could be neither inserted nor read")
        }
        if existing.state.isActive { return .active(existing) }
        return .started(try replace(existing, with: request, tx, time))
    }

    /// Writes `request` over `existing`, in its next generation, with a `replaced` event.
    private static func replace(
        _ existing: ItemRecord, with request: ValidRequest, _ tx: WriteTransaction, _ time: ClocksNow
    )
        throws -> ItemRecord
    {
        var item = newItem(request, time)
        item.id = existing.id
        item.generation = existing.generation + 1
        try tx.update(item)
        var event = EventRecord(item.kind == .stopwatch ? .stopwatchStarted : .replaced, item: item, at: time)
        event.detail = startDetail(item)
        try tx.append(event)
        return item
    }

    // MARK: - Changing one item

    /// The plan that runs `change` on the item under `key` in one transaction. A countdown that had come due is
    /// recorded expired first, so `change` sees it expired; that expiry commits even when
    /// `change` refuses.
    private static func change(
        _ key: String, _ action: CountdownAction, stored: StoredChange? = nil,
        _ change: @escaping @Sendable (inout ItemRecord, WriteTransaction, ClocksNow) throws -> Void
    ) throws(CountdownError) -> WritePlan<Result<Countdown, CountdownError>> {
        let key = try Validate.key(key)
        return WritePlan(action.writeOperation) { tx, time in
            if let stored, let operations = tx.storedOperations {
                return try Self.storedChange(stored, key, action, operations, tx, time)
            }
            guard var item = try tx.item(key: key) else { throw CountdownError.notFound(key) }
            guard item.isDue(at: time) else {
                try change(&item, tx, time)
                return .success(item.countdown(at: time))
            }
            // Recorded whatever the change does: a refusal (pausing a countdown that is over)
            // rolls back the change alone, and the expiry it found commits.
            try Self.expire(&item, tx, time)
            let expired = item
            do {
                return .success(
                    try tx.savepoint {
                        var changed = expired
                        try change(&changed, tx, time)
                        return changed.countdown(at: time)
                    })
            } catch let refusal as CountdownError {
                return .failure(refusal)
            }
        }
    }

    /// A change of one item that an engine runs itself, where it can (``StoredOperations``).
    struct StoredChange: Sendable {
        /// The engine's operation, at an instant.
        let run: @Sendable (any StoredOperations, OperationInstant) throws -> StoredOutcome
        /// The outcome of the change made, and the event it appended.
        let done: String
        let event: EventKind
        /// Throws the refusal the change makes of the item as it is: the store's own words for a
        /// refusal of the engine's.
        let refuse: @Sendable (ItemRecord) throws -> Void
    }

    /// Runs `stored`, the engine's own form of `action`, on the item under `key`: as
    /// ``change(_:_:stored:_:)`` does, the expiry it found due stays recorded when it refuses.
    private static func storedChange(
        _ stored: StoredChange, _ key: String, _ action: CountdownAction, _ operations: any StoredOperations,
        _ tx: WriteTransaction, _ time: ClocksNow
    ) throws -> Result<Countdown, CountdownError> {
        let done = try stored.run(operations, OperationInstant(time))
        guard let item = done.item else { throw CountdownError.notFound(key) }
        let changed = done.outcome == stored.done
        tx.noteStored(item, events: storedEvents(item, event: changed ? stored.event : nil, lateMs: done.lateMs, time))
        if changed { return .success(item.countdown(at: time)) }
        let refusal: CountdownError
        do {
            try Self.require(item, for: action)
            try stored.refuse(item)
            refusal = CountdownError(.storageFailure, "cannot \(action.name) \(quoted(key)): \(done.outcome)")
        } catch let error as CountdownError {
            refusal = error
        }
        // Nothing written: the transaction fails. An expiry recorded: it commits, the refusal returned.
        if done.lateMs == nil { throw refusal }
        return .failure(refusal)
    }

    /// Refuses `action` on an item in a state it does not accept (``CountdownAction/acceptedStates``),
    /// or on a stopwatch when it changes countdowns only.
    private static func require(_ item: ItemRecord, for action: CountdownAction) throws {
        if action.countdownsOnly, item.kind != .countdown {
            throw CountdownError(.wrongState, "cannot \(action.name) \(quoted(item.key)): it is a stopwatch")
        }
        guard action.acceptedStates.contains(item.state) else {
            let now =
                item.state == .cancelled
                ? "was cancelled" : item.state == .expired ? "has expired" : "is already \(item.state.rawValue)"
            throw CountdownError(.wrongState, "cannot \(action.name) \(quoted(item.key)): it \(now)")
        }
    }

    /// Pauses a running item: paused time never counts.
    ///
    /// One write transaction (the item and a `paused` event); the pause begins at the store's
    /// clocks now. A countdown's remaining time stays as it is until ``resume(_:)``.
    ///
    /// - Throws: ``CountdownError/Code/notFound`` for an unknown key,
    ///   ``CountdownError/Code/wrongState`` unless the item is running.
    @discardableResult
    public func pause(_ key: String) async throws(CountdownError) -> Countdown {
        try await run(Self.pausePlan(key))
    }

    static func pausePlan(_ key: String) throws(CountdownError) -> WritePlan<Result<Countdown, CountdownError>> {
        try change(key, .pause) { item, tx, time in
            try Self.require(item, for: .pause)
            item.pause(at: time)
            try tx.update(item)
            try tx.append(EventRecord(.paused, item: item, at: time))
        }
    }

    /// Resumes a paused item where it left off.
    ///
    /// One write transaction (the item and a `resumed` event); the time it spent paused is added
    /// to its total paused time, so its deadline moves later by that much.
    ///
    /// - Throws: ``CountdownError/Code/notFound`` for an unknown key,
    ///   ``CountdownError/Code/wrongState`` unless the item is paused.
    @discardableResult
    public func resume(_ key: String) async throws(CountdownError) -> Countdown {
        try await run(Self.resumePlan(key))
    }

    static func resumePlan(_ key: String) throws(CountdownError) -> WritePlan<Result<Countdown, CountdownError>> {
        try change(key, .resume) { item, tx, time in
            try Self.require(item, for: .resume)
            item.resume(at: time)
            try tx.update(item)
            try tx.append(EventRecord(.resumed, item: item, at: time))
        }
    }

    /// Stops a running or paused item for good; it stays queryable as `cancelled`.
    ///
    /// One write transaction (the item and a `cancelled` event). A cancelled countdown never
    /// expires; ``prune(olderThan:progress:)`` deletes it once it is old enough.
    ///
    /// - Throws: ``CountdownError/Code/notFound`` for an unknown key,
    ///   ``CountdownError/Code/wrongState`` unless the item is running or paused.
    @discardableResult
    public func cancel(_ key: String) async throws(CountdownError) -> Countdown {
        try await run(Self.cancelPlan(key))
    }

    static func cancelPlan(_ key: String) throws(CountdownError) -> WritePlan<Result<Countdown, CountdownError>> {
        let key = try Validate.key(key)
        let stored = StoredChange(
            run: { operations, instant in try operations.cancel(key: key, at: instant) }, done: "cancelled",
            event: .cancelled, refuse: { _ in })
        return try change(key, .cancel, stored: stored) { item, tx, time in
            try Self.require(item, for: .cancel)
            item.cancel(at: time)
            try tx.update(item)
            try tx.append(EventRecord(.cancelled, item: item, at: time))
        }
    }

    /// Starts an item again from zero with the same duration, in any state, in a new generation.
    ///
    /// One write transaction (the item and a `restarted` event). An expiry of the old generation
    /// that has not been delivered yet is never delivered.
    ///
    /// - Throws: ``CountdownError/Code/notFound`` for an unknown key.
    @discardableResult
    public func restart(_ key: String) async throws(CountdownError) -> Countdown {
        try await run(Self.restartPlan(key))
    }

    static func restartPlan(_ key: String) throws(CountdownError) -> WritePlan<Result<Countdown, CountdownError>> {
        try change(key, .restart) { item, tx, time in
            try Self.require(item, for: .restart)
            item.restart(at: time)
            try tx.update(item)
            try tx.append(EventRecord(.restarted, item: item, at: time))
        }
    }

    /// Adds `amount` to an active countdown's duration, in a new generation.
    ///
    /// One write transaction (the item and an `extended` event); the deadline moves later by
    /// `amount`, and the time already counted stays counted.
    ///
    /// - Throws: ``CountdownError/Code/invalidDuration`` for an amount outside 1 ms to 100 years
    ///   or a total over 100 years, ``CountdownError/Code/notFound`` for an unknown key,
    ///   ``CountdownError/Code/wrongState`` for a stopwatch or an item that is not active.
    @discardableResult
    public func extend(_ key: String, by amount: Duration) async throws(CountdownError) -> Countdown {
        try await run(Self.extendPlan(key, by: amount))
    }

    static func extendPlan(
        _ key: String, by amount: Duration
    ) throws(CountdownError) -> WritePlan<Result<Countdown, CountdownError>> {
        let key = try Validate.key(key)
        let amountMs = try Validate.duration(amount, what: "extension")
        // The duration `item` would have, or the refusal.
        let extended: @Sendable (ItemRecord) throws -> Int64 = { item in
            let duration = (item.durationMs ?? 0) + amountMs
            guard duration <= Validate.maximumDurationMs else {
                throw CountdownError(
                    .invalidDuration,
                    "cannot extend \(quoted(item.key)) by \(amount): its duration would exceed 100 years")
            }
            if let maxWait = item.maxWaitMs, duration > maxWait {
                throw CountdownError(
                    .invalidDuration,
                    "cannot extend \(quoted(item.key)) by \(amount): a debounced countdown never runs past its "
                        + "maximum wait (\(DurationText.format(milliseconds: maxWait)))")
            }
            return duration
        }
        let stored = StoredChange(
            run: { operations, instant in try operations.extend(key: key, byMs: amountMs, at: instant) },
            done: "extended", event: .extended, refuse: { item in _ = try extended(item) })
        return try change(key, .extend, stored: stored) { item, tx, time in
            try Self.require(item, for: .extend)
            let duration = try extended(item)
            item.changeDuration(by: amountMs, at: time)
            try tx.update(item)
            try tx.append(
                EventRecord(.extended, item: item, at: time, detail: ["by_ms": amountMs, "duration_ms": duration]))
        }
    }

    /// Takes `amount` off an active countdown's duration, in a new generation. Shortening past
    /// zero expires it at once.
    ///
    /// One write transaction (the item, a `shortened` event, and an `expired` event when it ends
    /// at once).
    ///
    /// - Throws: ``CountdownError/Code/invalidDuration`` for an amount outside 1 ms to 100 years,
    ///   ``CountdownError/Code/notFound`` for an unknown key,
    ///   ``CountdownError/Code/wrongState`` for a stopwatch or an item that is not active.
    @discardableResult
    public func shorten(_ key: String, by amount: Duration) async throws(CountdownError) -> Countdown {
        try await run(Self.shortenPlan(key, by: amount))
    }

    static func shortenPlan(
        _ key: String, by amount: Duration
    ) throws(CountdownError) -> WritePlan<Result<Countdown, CountdownError>> {
        let amountMs = try Validate.duration(amount, what: "shortening")
        return try change(key, .shorten) { item, tx, time in
            try Self.require(item, for: .shorten)
            let elapsed = max(0, item.rawElapsedMs(at: time))
            let shortened = (item.durationMs ?? 0) - amountMs
            // Past zero it is over at once: the duration becomes what actually ran, so it expires on time.
            let overshoot = shortened <= elapsed
            item.changeDuration(by: (overshoot ? elapsed : shortened) - (item.durationMs ?? 0), at: time)
            try tx.update(item)
            try tx.append(
                EventRecord(
                    .shortened, item: item, at: time, detail: ["by_ms": amountMs, "duration_ms": item.durationMs ?? 0]))
            if overshoot { try Self.expire(&item, tx, time) }
        }
    }

    /// Deletes the item under `key` whatever its state; returns it as it was.
    ///
    /// One write transaction (the deletion and a `removed` event). The key can be used again; its
    /// generations go on from where they were, so an old expiry never passes for a new one.
    ///
    /// - Throws: ``CountdownError/Code/notFound`` for an unknown key.
    @discardableResult
    public func remove(_ key: String) async throws(CountdownError) -> Countdown {
        try await run(Self.removePlan(key))
    }

    static func removePlan(_ key: String) throws(CountdownError) -> WritePlan<Result<Countdown, CountdownError>> {
        try change(key, .remove) { item, tx, time in
            try Self.require(item, for: .remove)
            try tx.delete(item)
            try tx.append(EventRecord(.removed, item: item, at: time))
        }
    }
}
