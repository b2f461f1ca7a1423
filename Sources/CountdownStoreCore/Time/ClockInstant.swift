import Foundation

/// The clocks at one instant, as the item formulas read them: ``StoreTime`` or ``Now``.
package protocol ClockInstant: Sendable {
    /// W.
    var wall: Int64 { get }
    /// A.
    var active: Int64 { get }
    /// G.
    var gap: Int64 { get }
    /// The item timeline of `policy`.
    func timeline(_ policy: CountdownPolicy) -> Int64
}
