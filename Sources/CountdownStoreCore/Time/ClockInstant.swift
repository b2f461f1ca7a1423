import Foundation

/// The clocks at one instant, as the item formulas read them: ``StoreTime`` or ``ClocksNow``.
package protocol ClockInstant: Sendable {
    /// W.
    var wall: Int64 { get }
    /// A.
    var active: Int64 { get }
    /// G.
    var gap: Int64 { get }
    /// The item timeline of `policy`.
    func timeline(_ policy: CountdownPolicy) -> Int64
    /// How far ahead of ``timeline(_:)`` an item of `policy` started now starts on its timeline,
    /// so that its deadline is placed at or after W now plus its duration (see ``ClocksNow``).
    func startDelay(_ policy: CountdownPolicy) -> Int64
}

extension ClockInstant {
    /// No delay: a bare reading of the clocks has no checkpoint to place a deadline from.
    package func startDelay(_ policy: CountdownPolicy) -> Int64 { 0 }
}
