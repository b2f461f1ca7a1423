-- CountdownStore schema, part 6: cooldowns and debounced countdowns.
--
-- A countdown may be started under a rule (`rule`): 'cooldown' (CountdownStore.cooldown: while it
-- runs, the key's next cooldown is refused with the time left) or 'debounce'
-- (CountdownStore.debounce: each call while it is active moves its deadline later, never past
-- `max_wait_ms` of counted time after the first call of its burst). NULL for a plain countdown or
-- a stopwatch. A column added with no default rewrites no row, and a check added NOT VALID holds
-- for every row written from now on without reading the rows there are (all NULL here).

ALTER TABLE countdowns ADD COLUMN rule text;
ALTER TABLE countdowns ADD COLUMN max_wait_ms bigint;
ALTER TABLE countdowns ADD CONSTRAINT countdowns_rule_check
    CHECK (rule IN ('cooldown', 'debounce')) NOT VALID;
ALTER TABLE countdowns ADD CONSTRAINT countdowns_max_wait_check
    CHECK ((rule IS NOT DISTINCT FROM 'debounce') = (max_wait_ms IS NOT NULL) AND max_wait_ms > 0) NOT VALID;

-- countdown_insert_with_event (migration 0003) with the two new columns of the item. The old
-- form stays, an overload for processes of the version before still running during an upgrade.
CREATE FUNCTION countdown_insert_with_event(
    item_key text, item_group text, item_kind text, item_policy text, item_state text,
    item_duration_ms bigint, item_generation bigint, item_start_offset_ms bigint, item_gap_at_start_ms bigint,
    item_started_at_ms bigint, item_paused_ms bigint, item_paused_at_ms bigint, item_deadline_ms bigint,
    item_final_elapsed_ms bigint, item_ended_at_ms bigint, item_expired_at_ms bigint,
    item_payload text, item_payload_bytes bytea, item_updated_at_ms bigint, item_rule text, item_max_wait_ms bigint,
    lock_class integer, channel text, wake_up text,
    event_kind text, event_key text, event_group text, event_at_ms bigint, event_deadline_at_ms bigint,
    event_fired_at_ms bigint, event_late_ms bigint, event_payload text, event_payload_bytes bytea, event_detail text)
RETURNS TABLE (id bigint, generation bigint)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    new_id bigint;
    new_generation bigint;
BEGIN
    INSERT INTO countdowns AS t (key, group_name, kind, policy, state, duration_ms, generation, start_offset_ms,
        gap_at_start_ms, started_at_ms, paused_ms, paused_at_ms, deadline_ms, final_elapsed_ms, ended_at_ms,
        expired_at_ms, payload, payload_bytes, updated_at_ms, rule, max_wait_ms)
    VALUES (item_key, item_group, item_kind, item_policy, item_state, item_duration_ms,
        greatest(item_generation,
                 coalesce((SELECT r.generation + 1 FROM countdown_retired_keys AS r WHERE r.key = item_key), 0)),
        item_start_offset_ms, item_gap_at_start_ms, item_started_at_ms, item_paused_ms, item_paused_at_ms,
        item_deadline_ms, item_final_elapsed_ms, item_ended_at_ms, item_expired_at_ms, item_payload,
        item_payload_bytes, item_updated_at_ms, item_rule, item_max_wait_ms)
    ON CONFLICT (key) DO NOTHING
    RETURNING t.id, t.generation INTO new_id, new_generation;
    IF new_id IS NULL THEN
        RETURN;
    END IF;
    PERFORM countdown_lock_event_writer(lock_class);
    IF channel IS NOT NULL THEN
        PERFORM pg_notify(channel, wake_up);
    END IF;
    INSERT INTO countdown_events (kind, key, group_name, generation, at_ms, deadline_at_ms, fired_at_ms, late_ms,
        payload, payload_bytes, detail)
    VALUES (event_kind, event_key, event_group, new_generation, event_at_ms, event_deadline_at_ms,
        event_fired_at_ms, event_late_ms, event_payload, event_payload_bytes, event_detail);
    id := new_id;
    generation := new_generation;
    RETURN NEXT;
END
$$;

-- The three columns are added at the end of countdown_figures (and of the views on it), so
-- that a query that names the earlier ones, or reads them by position, reads them as before.
--   rule         'cooldown' or 'debounce' for a countdown started under that rule, else NULL
--   max_wait_ms  a debounced countdown's maximum wait: its duration never grows past it
--   bound_at     when a running debounced countdown reaches its maximum wait: its deadline
--                never passes it (placed on W as deadline_at is)
CREATE OR REPLACE VIEW countdown_figures AS
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
               ELSE greatest(base_wall_ms + deadline_ms - base_ms, base_floor_ms + (deadline_ms - base_ms) / 2)
           END AS deadline_wall_ms,
           CASE state
               WHEN 'running' THEN now_ms - start_ms - paused_ms
               WHEN 'paused' THEN paused_at_ms - start_ms - paused_ms
               ELSE final_elapsed_ms
           END AS elapsed_basis_ms,
           -- a debounced countdown's bound, placed on W as its deadline is
           CASE
               WHEN state <> 'running' OR max_wait_ms IS NULL THEN NULL
               WHEN start_ms + paused_ms + max_wait_ms < base_ms
                   THEN base_wall_ms + start_ms + paused_ms + max_wait_ms - base_ms
               WHEN policy = 'active' AND NOT ticking THEN NULL
               ELSE greatest(base_wall_ms + start_ms + paused_ms + max_wait_ms - base_ms,
                             base_floor_ms + (start_ms + paused_ms + max_wait_ms - base_ms) / 2)
           END AS bound_wall_ms
    FROM timed
), raw AS (
    SELECT *,
           CASE WHEN due THEN 'expired' ELSE state END AS state_now,
           -- never before the change that set the deadline (updated_at_ms: a running item's last change)
           CASE WHEN due THEN greatest(updated_at_ms, least(now_wall_ms, coalesce(deadline_wall_ms, now_wall_ms)))
                ELSE expired_at_ms END AS expired_now_ms,
           CASE WHEN elapsed_basis_ms IS NOT NULL THEN greatest(0, elapsed_basis_ms) END AS raw_elapsed_ms
    FROM placed
), figures AS (
    SELECT *,
           CASE kind WHEN 'countdown' THEN
               CASE WHEN raw_elapsed_ms IS NOT NULL AND duration_ms IS NOT NULL
                    THEN least(raw_elapsed_ms, duration_ms) END
           ELSE raw_elapsed_ms END AS elapsed,
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
       to_char(to_timestamp((started_at_ms - ((started_at_ms % 1000) + 1000) % 1000) / 1000) AT TIME ZONE 'UTC',
               'YYYY-MM-DD"T"HH24:MI:SS')
           || '.' || lpad((((started_at_ms % 1000) + 1000) % 1000)::text, 3, '0') || 'Z' AS started_at,
       to_char(to_timestamp((deadline_now_ms - ((deadline_now_ms % 1000) + 1000) % 1000) / 1000) AT TIME ZONE 'UTC',
               'YYYY-MM-DD"T"HH24:MI:SS')
           || '.' || lpad((((deadline_now_ms % 1000) + 1000) % 1000)::text, 3, '0') || 'Z' AS deadline_at,
       to_char(to_timestamp((expired_now_ms - ((expired_now_ms % 1000) + 1000) % 1000) / 1000) AT TIME ZONE 'UTC',
               'YYYY-MM-DD"T"HH24:MI:SS')
           || '.' || lpad((((expired_now_ms % 1000) + 1000) % 1000)::text, 3, '0') || 'Z' AS expired_at,
       generation,
       coalesce(payload, '\x' || encode(payload_bytes, 'hex')) AS payload,
       rule,
       max_wait_ms,
       CASE state_now WHEN 'running' THEN
           to_char(to_timestamp((bound_wall_ms - ((bound_wall_ms % 1000) + 1000) % 1000) / 1000) AT TIME ZONE 'UTC',
                   'YYYY-MM-DD"T"HH24:MI:SS')
               || '.' || lpad((((bound_wall_ms % 1000) + 1000) % 1000)::text, 3, '0') || 'Z'
       END AS bound_at
FROM figures;

COMMENT ON COLUMN countdown_figures.bound_at IS 'When a running debounced countdown reaches its maximum wait.';

CREATE OR REPLACE VIEW active_countdowns AS
SELECT * FROM countdown_figures WHERE state IN ('running', 'paused');

CREATE OR REPLACE VIEW expired_countdowns AS
SELECT * FROM countdown_figures WHERE state = 'expired';
