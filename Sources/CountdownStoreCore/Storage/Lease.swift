import Foundation

/// The lease row: which store instance's ticker advances the active timeline.
package struct Lease: Sendable, Hashable {
    package var holder: String?
    package var acquiredAtMs: Int64?
    package var expiresAtMs: Int64

    /// A value with every field given.
    package init(holder: String?, acquiredAtMs: Int64?, expiresAtMs: Int64) {
        self.holder = holder
        self.acquiredAtMs = acquiredAtMs
        self.expiresAtMs = expiresAtMs
    }
}
