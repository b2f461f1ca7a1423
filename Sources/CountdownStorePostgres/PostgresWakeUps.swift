import Foundation

/// How hosts sharing a store on PostgreSQL learn of each other's writes.
public enum PostgresWakeUps: String, Sendable, Hashable, CaseIterable {
    /// LISTEN/NOTIFY, with polling as the fallback: a write on one host that moves the next
    /// deadline earlier (or records an expiry) wakes the tickers and event readers of the other
    /// hosts at once. The ticker keeps one connection of the pool listening. The default.
    case notifications = "notify"
    /// Polling alone, every 250 ms: for connections through PgBouncer in transaction pooling,
    /// where a LISTEN does not stay on one server connection. Writes still send notifications,
    /// for hosts that listen directly.
    case pollOnly = "poll"
}
