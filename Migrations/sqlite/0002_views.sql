-- CountdownStore schema, part 2: views for people at the sqlite3 prompt.
-- Figures are computed at query time, so they are right even while no process has the store open.

-- The store's clocks now, extrapolated from the last checkpoint with the system clock.
-- While a live lease holder ticks (and is not suspended) time since the checkpoint is active;
-- otherwise it is background gap, and active items show the value frozen at the last heartbeat.
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
    SELECT *, (suspended = 0 AND lease_expires_at_ms > heartbeat_at_ms + delta_ms) AS ticking FROM since
)
SELECT max(wall_floor_ms, heartbeat_at_ms + delta_ms)          AS wall_ms,
       active_ms + CASE WHEN ticking THEN delta_ms ELSE 0 END  AS active_ms,
       gap_ms + CASE WHEN ticking THEN 0 ELSE delta_ms END     AS gap_ms,
       ticking,
       CASE WHEN ticking THEN lease_holder END                 AS lease_holder,
       calibration_offset_ms
FROM live;

-- Every item with its figures now. Instants are ISO-8601 UTC text with milliseconds.
CREATE VIEW countdown_figures AS
WITH timed AS (
    SELECT c.*,
           n.wall_ms AS now_wall_ms,
           CASE c.policy WHEN 'wall' THEN n.active_ms + n.gap_ms ELSE n.active_ms END AS now_ms,
           c.start_offset_ms + CASE c.policy WHEN 'wall' THEN c.gap_at_start_ms ELSE 0 END AS start_ms
    FROM countdowns AS c, countdown_now AS n
), raw AS (
    SELECT *,
           max(0, CASE state
                      WHEN 'running' THEN now_ms - start_ms - paused_ms
                      WHEN 'paused' THEN paused_at_ms - start_ms - paused_ms
                      ELSE final_elapsed_ms
                  END) AS raw_elapsed_ms
    FROM timed
), figures AS (
    SELECT *,
           CASE kind WHEN 'countdown' THEN min(raw_elapsed_ms, duration_ms) ELSE raw_elapsed_ms END AS elapsed
    FROM raw
)
SELECT key,
       group_name,
       kind,
       policy,
       state,
       duration_ms,
       elapsed AS elapsed_ms,
       CASE kind WHEN 'countdown' THEN duration_ms - elapsed END AS remaining_ms,
       strftime('%Y-%m-%dT%H:%M:%S', started_at_ms / 1000, 'unixepoch')
           || printf('.%03dZ', started_at_ms % 1000) AS started_at,
       CASE WHEN state = 'running' AND kind = 'countdown' THEN
           strftime('%Y-%m-%dT%H:%M:%S', (now_wall_ms + duration_ms - elapsed) / 1000, 'unixepoch')
               || printf('.%03dZ', (now_wall_ms + duration_ms - elapsed) % 1000)
       END AS deadline_at,
       strftime('%Y-%m-%dT%H:%M:%S', expired_at_ms / 1000, 'unixepoch')
           || printf('.%03dZ', expired_at_ms % 1000) AS expired_at,
       generation,
       payload
FROM figures;

-- Running and paused items.
CREATE VIEW active_countdowns AS
SELECT * FROM countdown_figures WHERE state IN ('running', 'paused');

-- Items that reached zero.
CREATE VIEW expired_countdowns AS
SELECT * FROM countdown_figures WHERE state = 'expired';
