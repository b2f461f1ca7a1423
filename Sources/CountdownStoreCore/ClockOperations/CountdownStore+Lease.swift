import Foundation

// The store's lease: the instance that holds it counts time as active for every reader.

extension CountdownStore {
    /// Whether this instance holds the store's lease after a ``heartbeat()``.
    public enum LeaseStatus: Sendable, Hashable {
        /// This instance holds the lease until the given instant: its ticker advances the active timeline.
        case held(until: Date)
        /// Another instance holds it until the given instant; this one stands by.
        case heldElsewhere(by: String, until: Date)
    }

    /// Takes or renews the store's lease and writes a heartbeat (a checkpoint of the clocks).
    ///
    /// The ticker calls this every ``Configuration/heartbeatInterval``. While an instance holds a
    /// live lease, time counts as active; a lease not renewed within
    /// ``Configuration/leaseDuration`` is free for another instance to take.
    @discardableResult
    public func heartbeat() async throws(CountdownError) -> LeaseStatus {
        let me = instanceID
        let leaseMs = configuration.leaseDuration.milliseconds
        let suspended = state.withLock { $0.suspended }
        return try await writing(.heartbeat, notifies: false) { tx, time in
            let lease = try tx.lease()
            let free = lease.holder == nil || lease.expiresAtMs <= time.wall
            guard lease.holder == me || free else {
                return .heldElsewhere(by: lease.holder ?? "", until: Date(millisecondsSince1970: lease.expiresAtMs))
            }
            // Taking the lease (or renewing one that ran out) turns the time since the checkpoint
            // from background gap into active time for every reader: the checkpoint must be now.
            if free { try time.requireCheckpointAtNow() }
            if lease.holder != me, var checkpoint = try tx.checkpoint(), checkpoint.suspended != suspended {
                try time.requireCheckpointAtNow()
                // A new holder starts from its own host's state, not the suspended flag of a dead one.
                checkpoint.suspended = suspended
                try tx.save(checkpoint, creating: false)
            }
            let renewed = Lease(
                holder: me, acquiredAtMs: lease.holder == me ? lease.acquiredAtMs : time.wall,
                expiresAtMs: time.wall + leaseMs)
            let heldUntilBoot = self.configuration.clock.bootMilliseconds + (renewed.expiresAtMs - time.wall)
            self.state.withLock { memory in
                memory.tookLease = true
                memory.leaseHeldUntilBoot = heldUntilBoot
            }
            try tx.save(renewed)
            try self.remember(tx)
            return .held(until: Date(millisecondsSince1970: renewed.expiresAtMs))
        }
    }

    /// Writes a final heartbeat and gives up the lease if this instance holds it, so that another
    /// process's ticker can take over at once. The ticker calls this when it stops.
    public func releaseLease() async throws(CountdownError) {
        // An instance that never took the lease has nothing to give up and writes nothing.
        guard state.withLock({ $0.tookLease }) else { return }
        let me = instanceID
        try await writing(.heartbeat, notifies: false) { tx, time in
            var lease = try tx.lease()
            if lease.holder == me {
                // Giving it up turns the time since the checkpoint into background gap for every
                // reader: the checkpoint must be now.
                try time.requireCheckpointAtNow()
                lease.holder = nil
                lease.expiresAtMs = time.wall
                try tx.save(lease)
                try self.remember(tx)
            }
        }
    }
}
