-- CountdownStore schema, part 4: a countdown whose remaining time has reached zero is expired
-- for every reader, whether or not its expiry has been recorded yet.
--
-- Every write records the expiry of every countdown that has come due before it moves the
-- clock row on, so a countdown due but not yet recorded came due after the clock row's
-- checkpoint: the instant it reached zero follows from that row alone, and it does not move.

DROP VIEW expired_countdowns;
DROP VIEW active_countdowns;
DROP VIEW countdown_figures;
DROP VIEW countdown_now;

-- Ended items in a total order (instant, then key), so a listing can go on after any item.
DROP INDEX countdowns_expired_by_time;
CREATE INDEX countdowns_expired_by_time
    ON countdowns (expired_at_ms, key)
    WHERE state = 'expired';

DROP INDEX countdowns_expired_by_group;
CREATE INDEX countdowns_expired_by_group
    ON countdowns (group_name, expired_at_ms, key)
    WHERE state = 'expired';

DROP INDEX countdowns_cancelled_by_time;
CREATE INDEX countdowns_cancelled_by_time
    ON countdowns (ended_at_ms, key)
    WHERE state = 'cancelled';

DROP INDEX countdowns_cancelled_by_group;
CREATE INDEX countdowns_cancelled_by_group
    ON countdowns (group_name, ended_at_ms, key)
    WHERE state = 'cancelled';

-- The store's clocks now, extrapolated from the last checkpoint with the system clock.
-- While a live lease holder ticks (and is not suspended) time since the checkpoint is active;
-- otherwise it is background gap, and active items show the value frozen at the last heartbeat.
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
    SELECT *, (suspended = 0 AND lease_expires_at_ms > heartbeat_at_ms + delta_ms) AS ticking FROM since
)
SELECT max(heartbeat_at_ms + delta_ms, wall_floor_ms + delta_ms / 2) AS wall_ms,
       active_ms + CASE WHEN ticking THEN delta_ms ELSE 0 END     AS active_ms,
       gap_ms + CASE WHEN ticking THEN 0 ELSE delta_ms END        AS gap_ms,
       ticking,
       CASE WHEN ticking THEN lease_holder END                    AS lease_holder,
       calibration_offset_ms,
       heartbeat_at_ms                                            AS base_wall_ms,
       wall_floor_ms                                              AS base_floor_ms,
       active_ms                                                  AS base_active_ms,
       gap_ms                                                     AS base_gap_ms
FROM live;

-- Every item with its figures now. Instants are ISO-8601 UTC text with milliseconds.
--   state        a running countdown whose timeline has reached its deadline is 'expired'
--   deadline_at  when a running countdown reaches zero; for an active countdown, only while a
--                ticker holds the store (NULL otherwise: it does not count down meanwhile); for
--                an expired one, the instant it reached zero
--   expired_at   the instant it reached zero, recorded or not
CREATE VIEW countdown_figures AS
WITH timed AS (
    SELECT c.*,
           n.wall_ms AS now_wall_ms,
           n.ticking,
           n.base_wall_ms,
           n.base_floor_ms,
           CASE c.policy WHEN 'wall' THEN n.active_ms + n.gap_ms ELSE n.active_ms END AS now_ms,
           CASE c.policy WHEN 'wall' THEN n.base_active_ms + n.base_gap_ms ELSE n.base_active_ms END AS base_ms,
           c.start_offset_ms + CASE c.policy WHEN 'wall' THEN c.gap_at_start_ms ELSE 0 END AS start_ms
    FROM countdowns AS c, countdown_now AS n
), placed AS (
    SELECT *,
           (state = 'running' AND deadline_ms IS NOT NULL AND now_ms >= deadline_ms) AS due,
           -- W when the item's timeline reaches its deadline (Now.wall(when:reaches:) in the code)
           CASE
               WHEN deadline_ms IS NULL THEN NULL
               WHEN deadline_ms < base_ms THEN base_wall_ms + deadline_ms - base_ms
               WHEN policy = 'active' AND NOT ticking AND deadline_ms > now_ms THEN NULL
               ELSE max(base_wall_ms + deadline_ms - base_ms, base_floor_ms + (deadline_ms - base_ms) / 2)
           END AS deadline_wall_ms
    FROM timed
), raw AS (
    SELECT *,
           CASE WHEN due THEN 'expired' ELSE state END AS state_now,
           -- never before the change that set the deadline (updated_at_ms: a running item's last change)
           CASE WHEN due THEN max(updated_at_ms, min(now_wall_ms, coalesce(deadline_wall_ms, now_wall_ms)))
                ELSE expired_at_ms END AS expired_now_ms,
           max(0, CASE state
                      WHEN 'running' THEN now_ms - start_ms - paused_ms
                      WHEN 'paused' THEN paused_at_ms - start_ms - paused_ms
                      ELSE final_elapsed_ms
                  END) AS raw_elapsed_ms
    FROM placed
), figures AS (
    SELECT *,
           CASE kind WHEN 'countdown' THEN min(raw_elapsed_ms, duration_ms) ELSE raw_elapsed_ms END AS elapsed,
           CASE state_now WHEN 'running' THEN deadline_wall_ms WHEN 'expired' THEN expired_now_ms END AS deadline_now_ms
    FROM raw
)
SELECT key,
       group_name,
       kind,
       policy,
       state_now AS state,
       duration_ms,
       elapsed AS elapsed_ms,
       CASE kind WHEN 'countdown' THEN duration_ms - elapsed END AS remaining_ms,
       strftime('%Y-%m-%dT%H:%M:%S', started_at_ms / 1000, 'unixepoch')
           || printf('.%03dZ', started_at_ms % 1000) AS started_at,
       strftime('%Y-%m-%dT%H:%M:%S', deadline_now_ms / 1000, 'unixepoch')
           || printf('.%03dZ', deadline_now_ms % 1000) AS deadline_at,
       strftime('%Y-%m-%dT%H:%M:%S', expired_now_ms / 1000, 'unixepoch')
           || printf('.%03dZ', expired_now_ms % 1000) AS expired_at,
       generation,
       payload
FROM figures;

-- Running and paused items.
CREATE VIEW active_countdowns AS
SELECT * FROM countdown_figures WHERE state IN ('running', 'paused');

-- Items that reached zero, recorded or not.
CREATE VIEW expired_countdowns AS
SELECT * FROM countdown_figures WHERE state = 'expired';
