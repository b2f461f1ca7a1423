-- A host that opens after the database server's clock was stepped back, while no host held the
-- lease, counts from the last write's instant rather than from the checkpoint (writers leave
-- the checkpoint behind): the clock query also reads the instant of the store's last event.

DROP FUNCTION countdown_clocks();
CREATE FUNCTION countdown_clocks() RETURNS TABLE (
    created_at_ms bigint, active_ms bigint, gap_ms bigint, heartbeat_at_ms bigint, heartbeat_boot_ms bigint,
    boot_id text, wall_floor_ms bigint, suspended boolean, calibration_offset_ms bigint, calibrated_at_ms bigint,
    clock_skew_ms bigint, holder text, acquired_at_ms bigint, expires_at_ms bigint,
    soonest_wall_ms bigint, soonest_active_ms bigint, server_ms bigint, last_event_at_ms bigint)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT c.created_at_ms, c.active_ms, c.gap_ms, c.heartbeat_at_ms, c.heartbeat_boot_ms, c.boot_id,
        c.wall_floor_ms, c.suspended, c.calibration_offset_ms, c.calibrated_at_ms, c.clock_skew_ms,
        l.holder, l.acquired_at_ms, l.expires_at_ms,
        (SELECT w.deadline_ms FROM countdowns AS w
         WHERE w.state = 'running' AND w.deadline_ms IS NOT NULL AND w.policy = 'wall' ORDER BY w.deadline_ms LIMIT 1),
        (SELECT a.deadline_ms FROM countdowns AS a
         WHERE a.state = 'running' AND a.deadline_ms IS NOT NULL AND a.policy = 'active' ORDER BY a.deadline_ms LIMIT 1),
        floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint,
        (SELECT e.at_ms FROM countdown_events AS e ORDER BY e.id DESC LIMIT 1)
    FROM countdown_clock AS c LEFT JOIN countdown_lease AS l ON l.id = 1
    WHERE c.id = 1;
END
$$;
