import CountdownStore
import Foundation
import Logging
import ServiceLifecycle

/// Closes orders as their payment countdowns end: `expired` marks an order expired, `cancelled`
/// (a payment) marks it paid.
///
/// It reads the store's events as the named consumer `order-closer`, which keeps its place in the
/// database: events that came while the service was down arrive at the next start, oldest first.
/// Delivery is at least once, so closing an order is safe to repeat (``OrderBook/close(_:as:by:at:)``).
struct OrderCloser: Service {
    /// The consumer's name in `countdown_consumers`.
    static let consumerName = "order-closer"

    let store: CountdownStore
    let orders: OrderBook
    let logger: Logger

    func run() async throws {
        let consumer = try await store.consumer(Self.consumerName)
        let endings = EventFilter(kinds: [.expired, .cancelled], group: OrdersService.paymentGroup)
        for try await event in try await consumer.events(endings).cancelOnGracefulShutdown() {
            try await close(by: event)
            try await consumer.acknowledge(event)  // handled: never delivered to this consumer again
        }
    }

    private func close(by event: CountdownEvent) async throws {
        guard let key = event.key, let id = Order.id(fromCountdownKey: key) else { return }
        let expired = event.kind == .expired
        // An expiry closes the order at its deadline, a payment when it was recorded: both on the
        // store's wall clock, never this host's own.
        let outcome = try await orders.close(
            id, as: expired ? .expired : .paid, by: event,
            at: expired ? (event.deadlineAt ?? event.recordedAt) : event.recordedAt)
        switch outcome {
        case .closed:
            logger.info(
                "order closed", metadata: ["order": "\(id)", "as": "\(expired ? "expired" : "paid")", "late_ms": "\(event.lateMs ?? 0)"])
        case .redelivered:
            logger.info("order already closed by this event", metadata: ["order": "\(id)", "event": "\(event.id)"])
        case .unknownOrder:
            logger.warning("no order for countdown", metadata: ["key": "\(key)"])
        case .contradicts(let status):
            logger.error("event contradicts the order", metadata: ["order": "\(id)", "status": "\(status.rawValue)", "event": "\(event.kind.rawValue)"])
        }
    }
}
