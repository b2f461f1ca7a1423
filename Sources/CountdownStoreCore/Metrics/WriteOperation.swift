/// What a write transaction does: the `operation` dimension of `countdown_write_duration_seconds`.
enum WriteOperation: String, Sendable, CaseIterable {
    case start, pause, resume, cancel, restart, extend, shorten, remove
    /// A cooldown asked for (``CountdownStore/cooldown(_:duration:group:policy:payload:)``).
    case cooldown
    /// A call of a debounce (``CountdownStore/debounce(_:quiet:maxWait:group:policy:payload:)``).
    case debounce
    /// A batch of expiries (the ticker's, a backlog's, `expireDue`).
    case expire
    /// The lease holder's heartbeat, or giving up the lease.
    case heartbeat
    /// The host suspended or resumed.
    case lifecycle
    case calibrate
    /// A named consumer created, or its claims and acknowledgements.
    case consumer
    /// A batch of retention.
    case prune
}
