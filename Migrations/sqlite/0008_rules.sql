-- CountdownStore schema, part 8: cooldowns and debounced countdowns.
--
-- A countdown may be started under a rule (`rule`): 'cooldown' (CountdownStore.cooldown: while it
-- runs, the key's next cooldown is refused with the time left) or 'debounce'
-- (CountdownStore.debounce: each call while it is active moves its deadline later, never past
-- `max_wait_ms` of counted time after the first call of its burst). NULL for a plain countdown or
-- a stopwatch. Both columns are added without a CHECK, which SQLite would test against every row
-- of the table while the migration holds the write lock: the library writes only the values
-- above.

ALTER TABLE countdowns ADD COLUMN rule TEXT;
ALTER TABLE countdowns ADD COLUMN max_wait_ms INTEGER;

DROP VIEW expired_countdowns;
DROP VIEW active_countdowns;
DROP VIEW countdown_figures;

-- Every item with its figures now. Instants are ISO-8601 UTC text with milliseconds.
--   state        a running countdown whose timeline has reached its deadline is 'expired'
--   deadline_at  when a running countdown reaches zero; for an active countdown, only while a
--                ticker holds the store (NULL otherwise: it does not count down meanwhile); for
--                an expired one, the instant it reached zero
--   expired_at   the instant it reached zero, recorded or not
--   rule         'cooldown' or 'debounce' for a countdown started under that rule, else NULL
--   max_wait_ms  a debounced countdown's maximum wait: its duration never grows past it
--   bound_at     when a running debounced countdown reaches its maximum wait: its deadline
--                never passes it (placed on W as deadline_at is)
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
), bounded AS (
    SELECT *,
           -- a debounced countdown's bound, placed on W as its deadline is
           CASE
               WHEN state <> 'running' OR max_wait_ms IS NULL THEN NULL
               WHEN start_ms + paused_ms + max_wait_ms < base_ms
                   THEN base_wall_ms + start_ms + paused_ms + max_wait_ms - base_ms
               WHEN policy = 'active' AND NOT ticking THEN NULL
               ELSE max(base_wall_ms + start_ms + paused_ms + max_wait_ms - base_ms,
                        base_floor_ms + (start_ms + paused_ms + max_wait_ms - base_ms) / 2)
           END AS bound_wall_ms
    FROM placed
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
    FROM bounded
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
       payload,
       rule,
       max_wait_ms,
       CASE state_now WHEN 'running' THEN
           strftime('%Y-%m-%dT%H:%M:%S', bound_wall_ms / 1000, 'unixepoch')
               || printf('.%03dZ', bound_wall_ms % 1000)
       END AS bound_at
FROM figures;

-- Running and paused items.
CREATE VIEW active_countdowns AS
SELECT * FROM countdown_figures WHERE state IN ('running', 'paused');

-- Items that reached zero, recorded or not.
CREATE VIEW expired_countdowns AS
SELECT * FROM countdown_figures WHERE state = 'expired';
