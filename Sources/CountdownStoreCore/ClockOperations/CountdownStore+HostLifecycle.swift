import Foundation

// The host's lifecycle: suspended, time counts as background gap; resumed, as active.

extension CountdownStore {
    /// Tells the store the host is going to the background: from now until
    /// ``enterForeground()``, time counts as background gap, so `active` items stop and `wall`
    /// items keep counting. (It suspends the host's time, not a countdown: ``pause(_:)`` does that.)
    public func enterBackground() async throws(CountdownError) {
        try await setSuspended(true)
    }

    /// Tells the store the host is back in the foreground: time counts as active again. (It
    /// resumes the host's time, not a countdown: ``resume(_:)`` does that.)
    public func enterForeground() async throws(CountdownError) {
        try await setSuspended(false)
    }

    /// The host goes to the background: ``enterBackground()``, under its former name.
    @available(*, deprecated, renamed: "enterBackground()")
    public func suspend() async throws(CountdownError) {
        try await enterBackground()
    }

    /// The host is back in the foreground: ``enterForeground()``, under its former name, which
    /// read like ``resume(_:)`` of one countdown.
    @available(*, deprecated, renamed: "enterForeground()")
    public func resume() async throws(CountdownError) {
        try await enterForeground()
    }

    func setSuspended(_ suspended: Bool) async throws(CountdownError) {
        state.withLock { $0.suspended = suspended }
        let me = instanceID
        let leaseMs = configuration.leaseDuration.milliseconds
        try await writing(.lifecycle) { tx, time in
            guard var checkpoint = try tx.checkpoint(), checkpoint.suspended != suspended else { return }
            try time.requireCheckpointAtNow()
            checkpoint.suspended = suspended
            try tx.save(checkpoint, creating: false)
            var lease = try tx.lease()
            if !suspended, lease.holder == me {
                // Back in the foreground: active time counts from this instant, not from the next heartbeat.
                lease.expiresAtMs = time.wall + leaseMs
                try tx.save(lease)
            }
            try tx.append(EventRecord(suspended ? .hostSuspended : .hostResumed, at: time))
            try self.remember(tx)
        }
    }
}
