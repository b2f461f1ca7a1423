import CountdownStore
import Foundation

/// An action of a ``CountdownListModel`` that the store refused, or a read that failed: a value
/// a view can show (`.alert(item:)` takes it, being `Identifiable`).
public struct CountdownActionFailure: Error, Sendable, Hashable, Identifiable {
    /// What was asked.
    public enum Action: String, Sendable, Hashable {
        /// Reading or following the rows.
        case follow
        /// Starting a countdown or a stopwatch.
        case start
        /// Pausing an item.
        case pause
        /// Resuming an item.
        case resume
        /// Cancelling an item.
        case cancel
        /// Extending a countdown.
        case extend
        /// Restarting an item.
        case restart
        /// Removing an item.
        case remove
        /// Shortening a countdown.
        case shorten

        /// The failure's action for an item's ``CountdownAction``.
        public init(_ action: CountdownAction) {
            switch action {
            case .pause: self = .pause
            case .resume: self = .resume
            case .cancel: self = .cancel
            case .restart: self = .restart
            case .remove: self = .remove
            case .extend: self = .extend
            case .shorten: self = .shorten
            }
        }
    }

    /// Tells one failure from the next, even of the same action on the same key.
    public let id = UUID()
    /// What was asked.
    public var action: Action
    /// The key it was asked for, if any.
    public var key: String?
    /// The store's refusal, with its code and a message that names the bad value.
    public var error: CountdownError

    /// The store's message, for people.
    public var message: String { error.message }

    /// A failure of `action` on `key`.
    public init(_ action: Action, key: String?, _ error: CountdownError) {
        self.action = action
        self.key = key
        self.error = error
    }
}
