-- CountdownStore schema, part 7: the active timeline stands still where the lease ran out.
--
-- Time since the checkpoint is active up to the instant the lease runs out, and background gap
-- after it (it was all active while the lease was live, and all gap once it had run out). A
-- reader that saw A advance while a lease holder ticked never sees it go back when the holder
-- dies without giving the lease up: A stands still at the value it reached at the lease's end,
-- and the next holder starts from there.

DROP VIEW countdown_now;

-- The store's clocks now, extrapolated from the last checkpoint with the system clock.
-- Unless the host is suspended, time since the checkpoint is active until the lease runs out
-- (expires_at_ms in countdown_lease), and background gap after it: once no ticker holds the
-- store, active items show the value they reached when the lease ran out. Suspended, all of it
-- is background gap. `ticking` says whether the active timeline advances now.
-- W never goes back: while it is ahead of the trusted time (after a forced calibration to an
-- earlier time) it advances at half speed from its floor until the trusted time catches up.
-- The base_* columns are the checkpoint itself, from which instants on the items' timelines are
-- placed on W.
CREATE VIEW countdown_now AS
WITH reading AS (
    SELECT c.*,
           CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
               + c.calibration_offset_ms AS system_wall_ms,
           coalesce(l.expires_at_ms, 0) AS lease_expires_at_ms,
           l.holder AS lease_holder
    FROM countdown_clock AS c
    LEFT JOIN countdown_lease AS l ON l.id = 1
    WHERE c.id = 1
), since AS (
    SELECT *, max(0, system_wall_ms - heartbeat_at_ms) AS delta_ms FROM reading
), live AS (
    SELECT *,
           (suspended = 0 AND lease_expires_at_ms > heartbeat_at_ms + delta_ms) AS ticking,
           CASE WHEN suspended = 0 THEN min(delta_ms, max(0, lease_expires_at_ms - heartbeat_at_ms))
                ELSE 0 END AS counted_ms
    FROM since
)
SELECT max(heartbeat_at_ms + delta_ms, wall_floor_ms + delta_ms / 2) AS wall_ms,
       active_ms + counted_ms                                     AS active_ms,
       gap_ms + delta_ms - counted_ms                             AS gap_ms,
       ticking,
       CASE WHEN ticking THEN lease_holder END                    AS lease_holder,
       calibration_offset_ms,
       heartbeat_at_ms                                            AS base_wall_ms,
       wall_floor_ms                                              AS base_floor_ms,
       active_ms                                                  AS base_active_ms,
       gap_ms                                                     AS base_gap_ms
FROM live;
