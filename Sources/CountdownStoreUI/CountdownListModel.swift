import CountdownStore
import Foundation
import Observation

/// The countdowns and stopwatches a screen shows, kept up to date: an observable list of rows
/// for SwiftUI (or any code that observes with `withObservationTracking`).
///
/// The model follows a ``CountdownSelection`` of a store. ``follow()`` reads the rows, then reads
/// them again whenever the store changes, from this process or another (each change is an event
/// of the store; a burst of them is one read). Given a ticker and a `beat`, it also takes the
/// ticker's aligned beats: every row's figures change in one assignment, on the same instant as
/// every other subscriber of the ticker. A screen that draws its labels with
/// `Text(timerInterval:pauseTime:countsDown:showsHours:)` needs no beat at all: each
/// ``CountdownRow`` carries its interval and pause instant on the device's clock, and
/// ``CountdownRow/needsBeat`` says which rows change with time.
///
/// The actions (``start(_:duration:group:policy:payload:)``, ``perform(_:_:by:)`` of any
/// ``CountdownAction``, and its shorthands ``pause(_:)``, …) write through the store and refresh
/// the rows; a refusal becomes ``failure``, a value a view can show.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@Observable
@MainActor
public final class CountdownListModel {
    /// What the model follows.
    public let selection: CountdownSelection
    /// The interval of the beats the model takes from the ticker, or `nil` for none.
    public let beat: Duration?
    /// The rows, sorted as ``CountdownStore/list(_:group:limit:)`` sorts them.
    public private(set) var rows: [CountdownRow] = []
    /// The store clocks at the last beat (the aligned instant), or `nil` before the first.
    public private(set) var lastBeat: StoreTime?
    /// The last action or read that failed, until the next one succeeds or ``dismissFailure()``.
    public private(set) var failure: CountdownActionFailure?
    /// Whether some row changes with time, so that a label drawn from its figures needs beats.
    public var needsBeat: Bool { rows.contains { $0.needsBeat } }

    private let store: CountdownStore
    private let ticker: CountdownTicker?
    private let limit: Int
    /// The clock facts rows are computed with, as of the last read.
    @ObservationIgnored private var clock = ClockFacts()

    /// A model of `selection` in `store`, with at most `limit` rows (1 to 10,000). With a
    /// `ticker` and a `beat`, the rows' figures change on the ticker's aligned beats while the
    /// ticker runs.
    public init(
        store: CountdownStore, ticker: CountdownTicker? = nil, selection: CountdownSelection = .active,
        beat: Duration? = nil, limit: Int = 500
    ) {
        self.store = store
        self.ticker = ticker
        self.selection = selection
        self.beat = ticker == nil ? nil : beat
        self.limit = max(1, min(limit, 10_000))
    }

    /// Reads the rows, then keeps them up to date until the calling task is cancelled (in
    /// SwiftUI, run it from `.task { await model.follow() }`).
    public func follow() async {
        let events: CountdownEvents
        do throws(CountdownError) {
            events = try await store.events()
        } catch {
            failure = CountdownActionFailure(.follow, key: nil, error)
            return
        }
        await refresh()
        let (changes, changed) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        await withTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                do {
                    for try await _ in events { changed.yield() }
                } catch {}
                changed.finish()
            }
            tasks.addTask { [weak self] in
                for await _ in changes {
                    guard let self else { return }
                    await self.refresh()
                }
            }
            if let beat, let ticker, selection.hasActiveItems {
                tasks.addTask { [weak self] in await self?.followBeats(ticker, every: beat) }
            }
            await tasks.waitForAll()  // until the calling task is cancelled
        }
    }

    /// Reads the rows now.
    public func refresh() async {
        do throws(CountdownError) {
            let status = try await store.clockStatus()
            let items: [Countdown]
            switch selection {
            case .items(let state, let group):
                items = try await store.list(state, group: group, limit: limit)
            case .keys(let keys):
                var found: [Countdown] = []
                for key in keys.prefix(limit) {
                    if let item = try await store.countdown(key) { found.append(item) }
                }
                items = found.sorted(by: Self.listOrder)
            }
            clock = ClockFacts(status)
            rows = items.map(clock.row)
            if failure?.action == .follow { failure = nil }
        } catch {
            failure = CountdownActionFailure(.follow, key: nil, error)
        }
    }

    /// Takes the ticker's beats: each one sets every row's figures at once.
    private func followBeats(_ ticker: CountdownTicker, every beat: Duration) async {
        let beats: AsyncStream<TickSnapshot>
        do throws(CountdownError) {
            switch selection {
            case .keys(let keys): beats = try ticker.ticks(keys: keys, every: beat)
            case .items(_, let group): beats = try ticker.ticks(group: group, every: beat)
            }
        } catch {
            failure = CountdownActionFailure(.follow, key: nil, error)
            return
        }
        for await snapshot in beats {
            apply(snapshot)
        }
    }

    /// The rows of a beat: its items that belong to the selection, in `list`'s order, then (for
    /// a selection of every state) the ended rows it does not carry.
    private func apply(_ snapshot: TickSnapshot) {
        var items = snapshot.items.filter(selection.includes)
        if case .keys = selection { items.sort(by: Self.listOrder) }
        var beatRows = items.prefix(limit).map(clock.row)
        if case .items(.all, _) = selection {
            let carried = Set(beatRows.map(\.key))
            beatRows += rows.filter { !$0.state.isActive && !carried.contains($0.key) }
            beatRows = Array(beatRows.prefix(limit))
        }
        lastBeat = snapshot.time
        // Nothing counts and nothing came or went: the screen need not change.
        if !needsBeat, !beatRows.contains(where: \.needsBeat), beatRows.map(\.key) == rows.map(\.key),
            beatRows.map(\.state) == rows.map(\.state)
        {
            return
        }
        rows = beatRows
    }

    // MARK: - Actions

    /// Starts a countdown of `duration`; `nil` (and ``failure`` set) when the store refuses.
    @discardableResult
    public func start(
        _ key: String, duration: Duration, group: String? = nil, policy: CountdownPolicy = .wall,
        payload: CountdownPayload? = nil
    ) async -> Countdown? {
        await run(.start, key) { store throws(CountdownError) in
            try await store.start(key, duration: duration, group: group, policy: policy, payload: payload)
        }
    }

    /// Starts a stopwatch; `nil` (and ``failure`` set) when the store refuses.
    @discardableResult
    public func startStopwatch(
        _ key: String, group: String? = nil, policy: CountdownPolicy = .wall, payload: CountdownPayload? = nil
    ) async -> Countdown? {
        await run(.start, key) { store throws(CountdownError) in
            try await store.startStopwatch(key, group: group, policy: policy, payload: payload)
        }
    }

    /// Runs `action` on the item under `key` (with `amount`, for an action that
    /// ``CountdownAction/takesDuration``); `nil` (and ``failure`` set) when the store refuses.
    @discardableResult
    public func perform(_ action: CountdownAction, _ key: String, by amount: Duration? = nil) async -> Countdown? {
        await run(CountdownActionFailure.Action(action), key) { store throws(CountdownError) in
            try await action.perform(on: store, key: key, by: amount)
        }
    }

    /// Pauses a running item; `nil` (and ``failure`` set) when the store refuses.
    @discardableResult
    public func pause(_ key: String) async -> Countdown? {
        await perform(.pause, key)
    }

    /// Resumes a paused item; `nil` (and ``failure`` set) when the store refuses.
    @discardableResult
    public func resume(_ key: String) async -> Countdown? {
        await perform(.resume, key)
    }

    /// Cancels an active item; `nil` (and ``failure`` set) when the store refuses.
    @discardableResult
    public func cancel(_ key: String) async -> Countdown? {
        await perform(.cancel, key)
    }

    /// Adds `amount` to an active countdown; `nil` (and ``failure`` set) when the store refuses.
    @discardableResult
    public func extend(_ key: String, by amount: Duration) async -> Countdown? {
        await perform(.extend, key, by: amount)
    }

    /// Forgets ``failure``, as when the view showing it is dismissed.
    public func dismissFailure() {
        failure = nil
    }

    /// Runs an action, then reads the rows again; a refusal becomes ``failure``.
    private func run(
        _ action: CountdownActionFailure.Action, _ key: String,
        _ body: (CountdownStore) async throws(CountdownError) -> Countdown
    ) async -> Countdown? {
        do throws(CountdownError) {
            let item = try await body(store)
            failure = nil
            await refresh()
            return item
        } catch {
            failure = CountdownActionFailure(action, key: key, error)
            return nil
        }
    }

    /// `list`'s order: active items first, soonest to expire first (stopwatches last); then
    /// ended ones, most recent first; ties by key.
    nonisolated static func listOrder(_ a: Countdown, _ b: Countdown) -> Bool {
        if a.isActive != b.isActive { return a.isActive }
        if a.isActive {
            let (left, right) = (sortRemaining(a), sortRemaining(b))
            return left != right ? left < right : a.key < b.key
        }
        let (left, right) = (a.expiredAt ?? a.startedAt, b.expiredAt ?? b.startedAt)
        return left != right ? left > right : a.key < b.key
    }

    private nonisolated static func sortRemaining(_ item: Countdown) -> Duration {
        item.kind == .stopwatch ? .seconds(Int64.max / 2) : item.remaining ?? .zero
    }
}

/// What turns an item's figures into a row: whether `active` time runs, and the offset from the
/// store clock to the device's.
struct ClockFacts: Sendable {
    /// Whether `active` items count now: a ticker holds the lease and the host is not suspended.
    var activeTimeRuns = false
    /// Device clock minus store clock, in milliseconds: the skew minus the calibration.
    var deviceMinusStoreMs: Int64 = 0

    init() {}

    init(_ status: ClockStatus) {
        activeTimeRuns = !status.suspended && status.leaseHolder != nil
        deviceMinusStoreMs = Self.milliseconds(status.clockSkew) - Self.milliseconds(status.calibrationOffset)
    }

    func row(_ item: Countdown) -> CountdownRow {
        let counting = item.state == .running && (item.policy == .wall || activeTimeRuns)
        let deviceMs = item.computedAt.wall + deviceMinusStoreMs
        return CountdownRow(
            item: item, isCounting: counting, deviceTime: Date(timeIntervalSince1970: Double(deviceMs) / 1000))
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
