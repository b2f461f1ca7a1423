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

    /// Whether a write of this kind moves the checkpoint or the lease whatever the engine (a
    /// heartbeat or giving up the lease, suspending or resuming, calibrating): it takes the clock
    /// row's lock first. Where writers run side by side, every other write leaves the row alone
    /// unless it finds the clock edited.
    var movesCheckpoint: Bool {
        switch self {
        case .heartbeat, .lifecycle, .calibrate: true
        default: false
        }
    }
}
