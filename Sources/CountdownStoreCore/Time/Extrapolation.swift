import Foundation

/// The outcome of extrapolating a checkpoint to a reading.
struct Extrapolation: Sendable, Hashable {
    /// The three clocks now.
    var time: StoreTime
    /// W before the floor is applied: the base of the next checkpoint.
    var unflooredWall: Int64
    /// Whether the active timeline advances at this reading: the host is not suspended and the
    /// lease is live.
    var ticking: Bool
    /// Whether the checkpoint was taken in this boot.
    var sameBoot: Bool
    /// (system clock + calibration offset) − W: how far the system clock disagrees with the store.
    var skew: Int64
    /// How far `skew` may be off: the reading's uncertainty.
    var skewUncertainty: Int64 = 0
}
