import Foundation

/// A change of one item named by its key: the operations ``CountdownStore/pause(_:)``,
/// ``CountdownStore/resume(_:)``, ``CountdownStore/cancel(_:)``, ``CountdownStore/restart(_:)``,
/// ``CountdownStore/remove(_:)``, ``CountdownStore/extend(_:by:)`` and
/// ``CountdownStore/shorten(_:by:)`` as one value.
///
/// Every front end lists its actions from this type: the `countdown` tool has one command of
/// each ``name``, the HTTP API one `POST …/{name}` route, the dashboard one button for those it
/// offers, shown on the items it ``applies(to:)``. ``perform(on:key:by:)`` runs one on a store.
///
/// ```swift
/// for action in CountdownAction.allCases where action.applies(to: item) {
///     print(action.name, action.takesDuration ? "DURATION" : "")
/// }
/// try await CountdownAction.extend.perform(on: store, key: "order-1042", by: .seconds(60))
/// ```
public enum CountdownAction: String, Sendable, Hashable, CaseIterable {
    /// ``CountdownStore/pause(_:)``: a running item stops counting.
    case pause
    /// ``CountdownStore/resume(_:)``: a paused item counts again where it left off.
    case resume
    /// ``CountdownStore/cancel(_:)``: an active item stops for good.
    case cancel
    /// ``CountdownStore/restart(_:)``: any item starts again from zero, in a new generation.
    case restart
    /// ``CountdownStore/remove(_:)``: the item is deleted, whatever its state.
    case remove
    /// ``CountdownStore/extend(_:by:)``: an active countdown runs longer.
    case extend
    /// ``CountdownStore/shorten(_:by:)``: an active countdown runs shorter; past zero it expires.
    case shorten

    /// The action's name wherever it is spelled: the `countdown` command, the last segment of its
    /// HTTP route, the dashboard's `data-action`.
    public var name: String { rawValue }

    /// The action named `name`, or `nil` when no action has that name.
    public init?(name: String) {
        self.init(rawValue: name)
    }

    /// Whether the action takes a duration (how much to add or take off): the tool's second
    /// argument, the HTTP body's `duration`.
    public var takesDuration: Bool {
        switch self {
        case .extend, .shorten: true
        case .pause, .resume, .cancel, .restart, .remove: false
        }
    }

    /// The states of the items the action accepts; the store refuses it on an item in any other
    /// state with ``CountdownError/Code/wrongState``.
    public var acceptedStates: Set<CountdownState> {
        switch self {
        case .pause: [.running]
        case .resume: [.paused]
        case .cancel, .extend, .shorten: [.running, .paused]
        case .restart, .remove: Set(CountdownState.allCases)
        }
    }

    /// Whether the action applies to countdowns only: a stopwatch has no duration to change.
    public var countdownsOnly: Bool { takesDuration }

    /// Whether the store accepts the action on `item` as it is (its state and kind): what a
    /// screen offers on the item's row.
    public func applies(to item: Countdown) -> Bool {
        acceptedStates.contains(item.state) && (!countdownsOnly || item.kind == .countdown)
    }

    /// Runs the action on the item under `key` in `store`, and returns the item after it (as it
    /// was, for ``remove``).
    ///
    /// - Parameters:
    ///   - store: the store that holds the item.
    ///   - key: the item's key.
    ///   - amount: how much to add or take off, for an action that ``takesDuration``; `nil` for
    ///     the others.
    /// - Throws: what the store's operation throws; ``CountdownError/Code/invalidDuration``
    ///   when an action that takes a duration is given none, ``CountdownError/Code/invalidArgument``
    ///   when one that takes none is given one.
    @discardableResult
    public func perform(on store: CountdownStore, key: String, by amount: Duration? = nil)
        async throws(CountdownError) -> Countdown
    {
        if !takesDuration, let amount {
            throw CountdownError(.invalidArgument, "invalid duration \(amount): \(name) takes none")
        }
        switch self {
        case .pause: return try await store.pause(key)
        case .resume: return try await store.resume(key)
        case .cancel: return try await store.cancel(key)
        case .restart: return try await store.restart(key)
        case .remove: return try await store.remove(key)
        case .extend: return try await store.extend(key, by: try required(amount))
        case .shorten: return try await store.shorten(key, by: try required(amount))
        }
    }

    /// `amount`, or the refusal of an action that takes a duration and was given none.
    private func required(_ amount: Duration?) throws(CountdownError) -> Duration {
        guard let amount else {
            throw CountdownError(
                .invalidDuration, "missing duration: \(name) takes one, like 90s, 15m or 1h30m")
        }
        return amount
    }

    /// The operation the action's writes are measured under.
    var writeOperation: WriteOperation {
        switch self {
        case .pause: .pause
        case .resume: .resume
        case .cancel: .cancel
        case .restart: .restart
        case .remove: .remove
        case .extend: .extend
        case .shorten: .shorten
        }
    }
}
