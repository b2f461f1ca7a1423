import CountdownStore
import Foundation
import Logging
import ServiceLifecycle

/// Closes orders as their payment countdowns end: `expired` marks an order expired, `cancelled`
/// (a payment) marks it paid.
///
/// It reads the store's events as the named consumer `order-closer`, which keeps its place in the
/// database: events that came while the service was down arrive at the next start, oldest first.
/// Each order is closed in the same transaction as its event's acknowledgement
/// (``OrderBook/close(_:as:by:at:acknowledgingFor:in:)``), so each close takes effect once:
/// a crash before the commit leaves neither, and the event is delivered again.
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
            do {
                try await close(by: event, for: consumer)
            } catch let error as CountdownError where error.code == .claimLost {
                // This reader stalled and another took the event over: its close rolled back.
                logger.warning("another reader took this event over", metadata: ["event": "\(event.id)"])
            }
        }
    }

    private func close(by event: CountdownEvent, for consumer: EventConsumer) async throws {
        guard let key = event.key, let id = Order.id(fromCountdownKey: key) else {
            try await consumer.acknowledge(event)
            return
        }
        let expired = event.kind == .expired
        // An expiry closes the order at its deadline, a payment when it was recorded: both on the
        // store's wall clock, never this host's own.
        let outcome = try await orders.close(
            id, as: expired ? .expired : .paid, by: event,
            at: expired ? (event.deadlineAt ?? event.recordedAt) : event.recordedAt, acknowledgingFor: consumer,
            in: store)
        switch outcome {
        case .closed:
            logger.info(
                "order closed", metadata: ["order": "\(id)", "as": "\(expired ? "expired" : "paid")", "late_ms": "\(event.lateMs ?? 0)"])
        case .unknownOrder:
            logger.warning("no order for countdown", metadata: ["key": "\(key)"])
        case .contradicts(let status):
            logger.error("event contradicts the order", metadata: ["order": "\(id)", "status": "\(status.rawValue)", "event": "\(event.kind.rawValue)"])
        }
    }
}
