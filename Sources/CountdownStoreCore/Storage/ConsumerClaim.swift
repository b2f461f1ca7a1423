import Foundation

/// A range of events a reader of a named consumer has taken: its row in `countdown_consumer_claims`.
package struct ConsumerClaim: Sendable, Hashable {
    package var consumer: String
    package var firstID: Int64
    package var lastID: Int64
    /// Acknowledged up to this event id (`firstID - 1`: none yet).
    package var ackedThrough: Int64
    package var claimant: String
    /// The store wall clock at which another reader may take the claim over.
    package var claimedUntilMs: Int64

    /// Whether every event of the range is acknowledged.
    package var complete: Bool { ackedThrough >= lastID }

    /// A value with every field given.
    package init(
        consumer: String, firstID: Int64, lastID: Int64, ackedThrough: Int64, claimant: String, claimedUntilMs: Int64
    ) {
        self.consumer = consumer
        self.firstID = firstID
        self.lastID = lastID
        self.ackedThrough = ackedThrough
        self.claimant = claimant
        self.claimedUntilMs = claimedUntilMs
    }
}
