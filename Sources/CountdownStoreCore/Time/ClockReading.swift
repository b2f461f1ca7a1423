import Foundation

/// One reading of a ``StoreClock``.
package struct ClockReading: Sendable, Hashable {
    package var system: Int64
    package var boot: Int64
    package var bootID: String?
    /// How far `system` may be from the clock it reads at `boot`, in ms: 0 for the host's own
    /// clock; half the round trip of the statement that read a database server's clock.
    package var uncertainty: Int64

    package init(system: Int64, boot: Int64, bootID: String?, uncertainty: Int64 = 0) {
        self.system = system
        self.boot = boot
        self.bootID = bootID
        self.uncertainty = uncertainty
    }

    package init(_ clock: any StoreClock) {
        self.init(system: clock.systemMilliseconds, boot: clock.bootMilliseconds, bootID: clock.bootIdentity)
    }
}
