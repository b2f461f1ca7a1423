import CountdownStoreCore

// The columns each record's decoder (`init(row:)`, in the core) reads, in its order: every
// engine that speaks SQL selects them so.

extension ItemRecord {
    /// The columns of `countdowns` that `init(row:)` reads, in its order: every engine selects them so.
    package static let selectedColumns = """
        id, key, group_name, kind, policy, state, duration_ms, generation, start_offset_ms, gap_at_start_ms, \
        started_at_ms, paused_ms, paused_at_ms, deadline_ms, final_elapsed_ms, ended_at_ms, expired_at_ms, \
        payload, updated_at_ms, rule, max_wait_ms
        """
}

extension EventRecord {
    /// The columns of `countdown_events` that `init(row:)` reads, in its order.
    package static let selectedColumns =
        "id, kind, key, group_name, generation, at_ms, deadline_at_ms, fired_at_ms, late_ms, payload, detail"
}

extension Checkpoint {
    /// The columns of `countdown_clock` that `init(row:from:)` reads, in its order.
    package static let selectedColumns = """
        created_at_ms, active_ms, gap_ms, heartbeat_at_ms, heartbeat_boot_ms, boot_id, wall_floor_ms, suspended, \
        calibration_offset_ms, calibrated_at_ms, clock_skew_ms
        """
}

extension Lease {
    /// The columns of `countdown_lease` that `init(row:from:)` reads, in its order.
    package static let selectedColumns = "holder, acquired_at_ms, expires_at_ms"
}
