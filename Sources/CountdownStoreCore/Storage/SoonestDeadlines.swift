import Foundation

/// The earliest deadline of a running countdown on each timeline: what tells a transaction, at
/// no extra query, whether any countdown has come due.
package struct SoonestDeadlines: Sendable, Hashable {
    package var wall: Int64?
    package var active: Int64?

    /// The earliest deadline on `policy`'s timeline.
    package subscript(policy: CountdownPolicy) -> Int64? {
        policy == .wall ? wall : active
    }

    /// Whether a running countdown has reached its deadline at `time`.
    package func anyDue(at time: some ClockInstant) -> Bool {
        due(at: time) != SoonestDeadlines()
    }

    /// The deadlines that have been reached at `time`; nil for a timeline whose soonest has not.
    package func due(at time: some ClockInstant) -> SoonestDeadlines {
        func reached(_ policy: CountdownPolicy) -> Int64? {
            self[policy].flatMap { $0 <= time.timeline(policy) ? $0 : nil }
        }
        return SoonestDeadlines(wall: reached(.wall), active: reached(.active))
    }

    /// A value with every field given.
    package init(wall: Int64? = nil, active: Int64? = nil) {
        self.wall = wall
        self.active = active
    }
}
