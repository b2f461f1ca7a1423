import Foundation

/// A value a statement binds to one of its placeholders: the one kind of argument every engine
/// that speaks SQL takes, each converting it to its driver's binding.
package enum SQLValue: Sendable, Hashable {
    case int(Int64)
    case text(String)
    case bytes(Data)
    case bool(Bool)
    case null

    /// An integer, or NULL for `nil`.
    package static func int(_ value: Int64?) -> SQLValue { value.map { .int($0) } ?? .null }
    /// A text, or NULL for `nil`.
    package static func text(_ value: String?) -> SQLValue { value.map { .text($0) } ?? .null }
}
