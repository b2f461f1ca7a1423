import Foundation

/// Where a named consumer is: what it has acknowledged and how far behind the store it is.
public struct ConsumerStatus: Sendable, Hashable {
    /// The consumer's name.
    public var name: String
    /// The ID of the last event the consumer has passed (acknowledged, or skipped by its readers' filter).
    public var acknowledgedThrough: Int64
    /// How many events were recorded after it, by ID: what its readers have still to handle.
    public var lag: Int64
    /// When its cursor last moved, on the store wall clock.
    public var movedAt: Date
}

extension CountdownStore {
    /// Every named consumer, by name, with its cursor and lag: one read of the consumers' table
    /// and of the last event ID.
    public func consumerStatuses() async throws(CountdownError) -> [ConsumerStatus] {
        try await reading(events: true) { tx, _ in
            let last = try tx.lastEventID()
            return try tx.consumers().map { consumer in
                ConsumerStatus(
                    name: consumer.name, acknowledgedThrough: consumer.cursor, lag: max(0, last - consumer.cursor),
                    movedAt: Date(millisecondsSince1970: consumer.updatedAtMs))
            }
        }
    }
}
