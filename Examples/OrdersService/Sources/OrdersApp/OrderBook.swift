import CountdownStore
import Foundation
import GRDB

/// An order as the service stores it in its own table and returns it as JSON.
public struct Order: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    /// What the order is waiting for.
    public enum Status: String, Codable, Sendable, DatabaseValueConvertible {
        /// Placed; its payment deadline is running.
        case awaitingPayment = "awaiting_payment"
        /// Paid before its deadline.
        case paid
        /// Its deadline passed unpaid.
        case expired
    }

    /// The order's id, also the tail of its countdown's key (`order-<id>`).
    public var id: String
    /// What was ordered.
    public var item: String
    /// The price in cents.
    public var amountCents: Int
    /// Where the order stands.
    public var status: Status
    /// When the order was placed, on the store's wall clock.
    public var createdAt: Date
    /// When it was paid or expired, on the store's wall clock.
    public var closedAt: Date?
    /// The countdown event that closed it (`cancelled` for a payment, `expired` for an expiry):
    /// written in the same transaction as the event's acknowledgement, so exactly once.
    public var closingEventID: Int64?

    /// The table's name.
    public static let databaseTableName = "orders"

    enum CodingKeys: String, CodingKey {
        case id, item, status
        case amountCents = "amount_cents", createdAt = "created_at", closedAt = "closed_at"
        case closingEventID = "closing_event_id"
    }

    /// The key of the order's payment countdown.
    public var countdownKey: String { Self.countdownKey(id) }

    /// The key of the payment countdown of the order `id`.
    public static func countdownKey(_ id: String) -> String { "order-\(id)" }

    /// The order id in a payment countdown's key, or `nil` for another key.
    public static func id(fromCountdownKey key: String) -> String? {
        key.hasPrefix("order-") ? String(key.dropFirst("order-".count)) : nil
    }
}

/// The service's own tables, in the same GRDB database as the countdowns.
public struct OrderBook: Sendable {
    /// The database the orders and the countdowns share.
    public let database: DatabasePool

    /// Opens (or creates) the service's database and brings its own tables up to date.
    public init(path: String) throws {
        var configuration = GRDB.Configuration()
        configuration.busyMode = .timeout(10)  // the countdown tool may write to the same file
        database = try DatabasePool(path: path, configuration: configuration)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("createOrders") { db in
            try db.create(table: Order.databaseTableName) { table in
                table.primaryKey("id", .text)
                table.column("item", .text).notNull()
                table.column("amount_cents", .integer).notNull()
                table.column("status", .text).notNull()
                table.column("created_at", .datetime).notNull()
                table.column("closed_at", .datetime)
                table.column("closing_event_id", .integer)
            }
        }
        try migrator.migrate(database)
    }

    /// Places a new order and starts its payment countdown in one transaction: both are
    /// written, or neither is. The store refuses a window out of range (1 ms to 100 years)
    /// naming it, and nothing is written.
    func place(
        id: String, item: String, amountCents: Int, paymentWindow: Duration, in store: CountdownStore
    ) async throws -> (Order, Countdown) {
        try await database.write { db in
            let countdown = try store.transaction(in: db).start(
                Order.countdownKey(id), duration: paymentWindow, group: OrdersService.paymentGroup)
            let order = Order(
                id: id, item: item, amountCents: amountCents, status: .awaitingPayment,
                createdAt: countdown.startedAt, closedAt: nil, closingEventID: nil)
            try order.insert(db)
            return (order, countdown)
        }
    }

    /// The order `id`, if there is one.
    public func order(_ id: String) async throws -> Order? {
        try await database.read { db in try Order.fetchOne(db, key: id) }
    }

    /// The orders with these ids, by id.
    func orders(_ ids: [String]) async throws -> [String: Order] {
        let orders = try await database.read { db in try Order.fetchAll(db, keys: ids) }
        return Dictionary(uniqueKeysWithValues: orders.map { ($0.id, $0) })
    }

    /// Cancels the payment countdown of order `id` and marks the order paid, in one transaction.
    /// The store decides between a payment and the deadline: exactly one of the cancellation
    /// and the expiry wins (a countdown that came due is recorded expired first, and the
    /// cancellation refused with ``CountdownError/Code/wrongState``; nothing else is written).
    func pay(_ id: String, in store: CountdownStore) async throws -> Countdown {
        try await database.write { db in
            let cancelled = try store.transaction(in: db).cancel(Order.countdownKey(id))
            try db.execute(
                sql: "UPDATE orders SET status = ?, closed_at = ? WHERE id = ? AND status = ?",
                arguments: [Order.Status.paid, cancelled.computedAt.wallDate, id, Order.Status.awaitingPayment])
            return cancelled
        }
    }

    /// What handling a closing event did to its order.
    enum Outcome: Equatable {
        /// The order was closed by this event.
        case closed
        /// No order has that id (a countdown of this group started by someone else, such as the
        /// `countdown` tool: the service itself places an order and its countdown together).
        case unknownOrder
        /// The order was closed the other way (paid, yet its deadline expired): a bug if it happens.
        case contradicts(Order.Status)
    }

    /// Closes the order of a payment countdown's `cancelled` or `expired` event, and acknowledges
    /// the event for `consumer` in the same transaction: the order is closed once, whatever
    /// crashes, and a reader that lost its claim to another (it stalled) rolls its close back,
    /// with ``CountdownError/Code/claimLost``.
    func close(
        _ id: String, as status: Order.Status, by event: CountdownEvent, at instant: Date,
        acknowledgingFor consumer: EventConsumer, in store: CountdownStore
    ) async throws -> Outcome {
        try await database.write { db in
            let countdowns = try store.transaction(in: db)
            guard var order = try Order.fetchOne(db, key: id) else {
                try countdowns.acknowledge(event, of: consumer)
                return .unknownOrder
            }
            // The payment route marks an order paid before its `cancelled` event arrives.
            let open = order.status == .awaitingPayment || (order.status == status && order.closingEventID == nil)
            try countdowns.acknowledge(event, of: consumer)
            guard open else { return .contradicts(order.status) }
            order.status = status
            order.closedAt = order.closedAt ?? instant
            order.closingEventID = event.id
            try order.update(db)
            return .closed
        }
    }
}
