import Foundation

/// The one error type of CountdownStore: a code to switch on and a message that names the bad value.
///
/// Every throwing method of the library throws `CountdownError` and nothing else: they are
/// declared with typed throws, `throws(CountdownError)`. A `do`/`catch` around a direct call
/// catches it typed:
///
/// ```swift
/// do {
///     try await store.pause("order-1042")
/// } catch {
///     print(error.code, error.message)  // error is a CountdownError here
/// }
/// ```
///
/// Inside a closure whose type Swift infers as throwing `any Error` (a route handler, a task),
/// the same `catch` sees `any Error`; match the type there:
///
/// ```swift
/// let refusal: @Sendable () async throws -> String = {
///     do {
///         return try await store.pause("order-1042").key
///     } catch let error as CountdownError where error.code == .wrongState {
///         return "already over: \(error.message)"
///     }
/// }
/// ```
///
/// Codes are an open set of static members, so new ones can be added without breaking callers.
/// Storage failures keep what the database engine reported in ``underlyingError``, and name the
/// file or the database.
public struct CountdownError: Error, Sendable, Hashable, CustomStringConvertible, LocalizedError {
    /// What went wrong, as a stable identifier.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's stable name, for logs and JSON.
        public let name: String
        /// The broad kind of failure, which decides the `countdown` tool's exit status.
        public let category: Category

        init(_ name: String, _ category: Category) {
            self.name = name
            self.category = category
        }

        /// The code's stable name.
        public var description: String { name }

        /// A key that is empty, too long, or holds control characters.
        public static let invalidKey = Code("invalidKey", .invalidInput)
        /// A group name that is empty, too long, or holds control characters.
        public static let invalidGroup = Code("invalidGroup", .invalidInput)
        /// A payload larger than 64 KiB.
        public static let invalidPayload = Code("invalidPayload", .invalidInput)
        /// A duration that is not between 1 ms and 100 years, or not a duration at all.
        public static let invalidDuration = Code("invalidDuration", .invalidInput)
        /// Any other argument out of range: a limit, an instant, a cursor, a batch with a repeated key.
        public static let invalidArgument = Code("invalidArgument", .invalidInput)
        /// A server time that would move the store wall clock back, or more than a day ahead,
        /// handed to ``CountdownStore/calibrate(serverTime:force:)`` without `force`.
        public static let calibrationNeedsForce = Code("calibrationNeedsForce", .invalidInput)
        /// No item has that key.
        public static let notFound = Code("notFound", .notFound)
        /// Starting a key that is already running or paused, without asking to replace it.
        public static let alreadyActive = Code("alreadyActive", .conflict)
        /// The operation does not apply to the item in its current state (pausing a paused item).
        public static let wrongState = Code("wrongState", .conflict)
        /// An acknowledgement from a reader that no longer holds the claim on its event: another
        /// reader took it over (this one stalled past ``CountdownStore/Configuration/claimTimeout``).
        /// Nothing was written; in a transaction of the host's, roll it back.
        public static let claimLost = Code("claimLost", .conflict)
        /// The database was written by a newer CountdownStore; it is left untouched.
        public static let schemaTooNew = Code("schemaTooNew", .storage)
        /// The file is a database that belongs to something else; it is left untouched.
        public static let foreignDatabase = Code("foreignDatabase", .storage)
        /// The file is not a readable database of its engine (corrupt, truncated, or not a
        /// database at all).
        public static let unreadableDatabase = Code("unreadableDatabase", .storage)
        /// Another process held the database's write lock for longer than the busy timeout.
        public static let databaseBusy = Code("databaseBusy", .storage)
        /// The disk (or the file system's quota) is full; nothing of the operation was written.
        public static let diskFull = Code("diskFull", .storage)
        /// The file could not be opened, read or written: an I/O error, permissions, a read-only file.
        public static let ioFailure = Code("ioFailure", .storage)
        /// Any other storage failure.
        public static let storageFailure = Code("storageFailure", .storage)
    }

    /// The broad kinds of failure.
    public enum Category: String, Sendable, Hashable {
        /// The caller's input was refused; nothing was written.
        case invalidInput
        /// The item does not exist.
        case notFound
        /// The item exists but is in a state the operation does not accept.
        case conflict
        /// The database could not be read or written.
        case storage
    }

    /// What the caller can change for the call to be accepted: an option of the call, which
    /// each front end names in its own words.
    ///
    /// The library's ``message`` names it as the Swift API spells it (``description``); the
    /// `countdown` tool as its option (`--replace`), the HTTP API as the field of its body
    /// (`"when_active"`). ``message(hint:)`` renders the message with another wording.
    public enum Hint: Sendable, Hashable, CustomStringConvertible {
        /// Start the key again with `whenActive` set to the value (``WhenActive/replace``: start
        /// it again from zero): `countdown start --replace`, the body's `"when_active"`.
        case startWhenActive(WhenActive)
        /// Calibrate again with `force` (``CountdownStore/calibrate(serverTime:force:)``):
        /// `countdown calibrate --force`.
        case calibrateWithForce

        /// The hint as the Swift API spells it: `start it with whenActive: .replace`,
        /// `calibrate with force`.
        public var description: String {
            switch self {
            case .startWhenActive(let value): "start it with whenActive: .\(value.rawValue)"
            case .calibrateWithForce: "calibrate with force"
            }
        }
    }

    /// What went wrong.
    public let code: Code
    /// One line for people, naming the problem and the value (and the ``hint``, as the Swift
    /// API spells it).
    public let message: String
    /// What the caller can change for the call to be accepted, when the library knows; `nil`
    /// otherwise. ``message`` names it; a front end renders it in its own words with
    /// ``message(hint:)``.
    public let hint: Hint?
    /// The message's text before and after its hint, when it has one.
    private let aroundHint: (before: String, after: String)?

    /// The failure this error reports, when it reports one from below the library (the database
    /// library's own error, for a storage failure); `nil` otherwise. Not part of equality.
    public let underlyingError: (any Error & Sendable)?

    /// Creates an error with a code and a message naming the bad value.
    public init(_ code: Code, _ message: String) {
        self.init(code, message, underlying: nil)
    }

    /// Creates an error with a code, a message, and the failure it reports.
    public init(_ code: Code, _ message: String, underlying: (any Error & Sendable)?) {
        self.code = code
        self.message = message
        self.underlyingError = underlying
        self.hint = nil
        self.aroundHint = nil
    }

    /// Creates an error whose message names what to change: `before`, the hint, then `after`.
    public init(_ code: Code, _ before: String, hint: Hint, _ after: String = "") {
        self.code = code
        self.message = before + hint.description + after
        self.underlyingError = nil
        self.hint = hint
        self.aroundHint = (before, after)
    }

    /// The message with its ``hint`` in the words `wording` gives it (the ``message`` itself
    /// when the error has no hint, or `wording` returns `nil`).
    ///
    /// ```swift
    /// let line = error.message(hint: { hint in
    ///     hint == .startWhenActive(.replace) ? "use countdown start --replace" : nil
    /// })
    /// ```
    public func message(hint wording: (Hint) -> String?) -> String {
        guard let hint, let aroundHint, let words = wording(hint) else { return message }
        return aroundHint.before + words + aroundHint.after
    }

    /// Equal when the codes and messages are.
    public static func == (lhs: CountdownError, rhs: CountdownError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message
    }

    /// Hashes the code and the message.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
    }

    /// The message.
    public var description: String { message }
    /// The message, for `localizedDescription`.
    public var errorDescription: String? { message }
}

extension CountdownError {
    /// A calibration refused without `force`, saying what W would do.
    static func calibrationNeedsForce(serverMs: Int64, wallMs: Int64, differenceMs: Int64) -> CountdownError {
        let server = StoreTime.iso8601(milliseconds: serverMs)
        let wall = StoreTime.iso8601(milliseconds: wallMs)
        if differenceMs < 0 {
            let behind = DurationText.format(milliseconds: -differenceMs)
            return CountdownError(
                .calibrationNeedsForce,
                "refused server time \(server): it is \(behind) behind the store clock (\(wall)), "
                    + "which never goes back; calibrated to it, the store clock would advance at half speed for "
                    + "\(DurationText.format(milliseconds: -2 * differenceMs)) until the server time caught up; ",
                hint: .calibrateWithForce, " to accept that"
            )
        }
        let ahead = DurationText.format(milliseconds: differenceMs)
        return CountdownError(
            .calibrationNeedsForce,
            "refused server time \(server): it is \(ahead) ahead of the store clock (\(wall)), more than a day; "
                + "the store clock never goes back, so undoing it would leave the store clock at half speed for "
                + "\(DurationText.format(milliseconds: 2 * differenceMs)); ",
            hint: .calibrateWithForce, " to accept it"
        )
    }

    package static func notFound(_ key: String) -> CountdownError {
        CountdownError(.notFound, "no countdown with key \(quoted(key))")
    }
}

/// A value quoted for an error message, with control characters escaped and long values cut
/// after `limit` characters (between grapheme clusters, never inside one).
package func quoted(_ value: String, limit: Int = 80) -> String {
    var shown = ""
    var count = 0
    for character in value {
        if count == limit {
            shown += "…"
            break
        }
        for scalar in character.unicodeScalars {
            shown += scalar.properties.generalCategory == .control ? scalar.escaped(asASCII: true) : String(scalar)
        }
        count += 1
    }
    return "'\(shown)'"
}
