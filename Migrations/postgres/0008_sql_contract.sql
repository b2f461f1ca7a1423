-- CountdownStore schema, part 8 (PostgreSQL only): the SQL contract, for hosts in any language.
--
-- Five functions a host calls inside its own transaction, from any client (psql, psycopg, pgx,
-- node-postgres), and a stable contract (see the article "Transactions and exactly-once effects"):
--
--   countdown_start(key, duration, "group", payload, policy) RETURNS jsonb
--   countdown_cancel(key) RETURNS jsonb
--   countdown_extend(key, by) RETURNS jsonb
--   countdown_claim(consumer, claimant, max_events, claim_for) RETURNS SETOF jsonb
--   countdown_ack(consumer, claimant, event_id) RETURNS boolean
--
-- Each of them reads the store's clocks from countdown_now and calls the function that does the
-- work (countdown_start_at and the others below), which the library's own PostgreSQL engine
-- calls too, with the clocks of its host: one implementation of each operation on this engine.
-- Refusals come back from those as an outcome, not an error, so that the library keeps the
-- expiry a refused change found (the public functions raise, and change nothing).

-- What the functions need to know of the store that its schema's name decides: the NOTIFY
-- channel its hosts listen on, and the first key of its event writers' advisory locks. One row,
-- written by the library when it opens the store.
CREATE TABLE countdown_contract (
    id               bigint  PRIMARY KEY CHECK (id = 1),
    channel          text    NOT NULL,
    event_lock_class integer NOT NULL
);

COMMENT ON TABLE countdown_contract IS 'The store''s NOTIFY channel and event lock class, for the SQL functions: one row, id 1.';

-- The store's clocks at one instant, with the checkpoint they were extrapolated from (the
-- columns of countdown_now that the operations read).
CREATE TYPE countdown_instant AS (
    wall_ms        bigint,
    active_ms      bigint,
    gap_ms         bigint,
    ticking        boolean,
    base_wall_ms   bigint,
    base_floor_ms  bigint,
    base_active_ms bigint,
    base_gap_ms    bigint
);

-- The item timeline of `policy` at `t`: A + G for 'wall', A for 'active'.
CREATE FUNCTION countdown_timeline(t countdown_instant, item_policy text) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE item_policy WHEN 'wall' THEN t.active_ms + t.gap_ms ELSE t.active_ms END
$$;

-- The instant on W at which the `policy` timeline reads `value`, placed from the checkpoint;
-- NULL for an 'active' timeline that stands still and has not reached it.
CREATE FUNCTION countdown_placed(t countdown_instant, item_policy text, value bigint) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    since bigint := value - CASE item_policy WHEN 'wall' THEN t.base_active_ms + t.base_gap_ms
                                             ELSE t.base_active_ms END;
BEGIN
    IF since < 0 THEN
        RETURN t.base_wall_ms + since;
    END IF;
    IF item_policy = 'active' AND NOT t.ticking AND value > t.active_ms THEN
        RETURN NULL;
    END IF;
    RETURN greatest(t.base_wall_ms + since, t.base_floor_ms + since / 2);
END
$$;

-- How far ahead of the `policy` timeline now an item started at `t` starts on it: the time W
-- runs ahead of where the checkpoint places the timeline (zero almost always).
CREATE FUNCTION countdown_start_delay(t countdown_instant, item_policy text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    since bigint;
    reaching bigint;
BEGIN
    IF item_policy = 'active' AND NOT t.ticking THEN
        RETURN 0;
    END IF;
    since := CASE item_policy WHEN 'wall' THEN t.active_ms + t.gap_ms - t.base_active_ms - t.base_gap_ms
                              ELSE t.active_ms - t.base_active_ms END;
    IF since < 0 OR greatest(t.base_wall_ms + since, t.base_floor_ms + since / 2) >= t.wall_ms THEN
        RETURN 0;
    END IF;
    reaching := least(t.wall_ms - t.base_wall_ms, 2 * (t.wall_ms - t.base_floor_ms));
    RETURN greatest(0, reaching - since);
END
$$;

-- An item's elapsed time at `t`: never negative, at most a countdown's duration.
CREATE FUNCTION countdown_elapsed(c countdowns, t countdown_instant) RETURNS bigint
LANGUAGE sql IMMUTABLE SET search_path FROM CURRENT AS $$
    SELECT CASE WHEN c.duration_ms IS NULL THEN raw ELSE least(raw, c.duration_ms) END
    FROM (SELECT greatest(0, CASE c.state
        WHEN 'running' THEN countdown_timeline(t, c.policy)
            - (c.start_offset_ms + CASE c.policy WHEN 'wall' THEN c.gap_at_start_ms ELSE 0 END) - c.paused_ms
        WHEN 'paused' THEN coalesce(c.paused_at_ms, countdown_timeline(t, c.policy))
            - (c.start_offset_ms + CASE c.policy WHEN 'wall' THEN c.gap_at_start_ms ELSE 0 END) - c.paused_ms
        ELSE coalesce(c.final_elapsed_ms, 0) END) AS raw) AS e
$$;

-- An instant in ms since 1970 as the tool prints it: ISO 8601, UTC, with milliseconds.
CREATE FUNCTION countdown_iso8601(ms bigint) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT to_char(to_timestamp((ms - ((ms % 1000) + 1000) % 1000) / 1000) AT TIME ZONE 'UTC',
                   'YYYY-MM-DD"T"HH24:MI:SS')
        || '.' || lpad((((ms % 1000) + 1000) % 1000)::text, 3, '0') || 'Z'
$$;

-- A payload as the tool prints it: text as it is, bytes as base64 (on one line).
CREATE FUNCTION countdown_payload_text(payload text, payload_bytes bytea) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(payload, translate(encode(payload_bytes, 'base64'), E'\n', ''))
$$;

-- The item `c` at `t` as `countdown show --json` and the HTTP API show it. A countdown that has
-- reached zero is expired, with the instant it reached zero, even before its expiry is recorded.
CREATE FUNCTION countdown_item_json(c countdowns, t countdown_instant) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE SET search_path FROM CURRENT AS $$
DECLARE
    due boolean := c.state = 'running' AND c.deadline_ms IS NOT NULL
                   AND countdown_timeline(t, c.policy) >= c.deadline_ms;
    due_at bigint;
    deadline_at bigint;
    elapsed bigint := countdown_elapsed(c, t);
    bound_at bigint;
BEGIN
    IF due THEN
        due_at := greatest(c.updated_at_ms,
                           least(t.wall_ms, coalesce(countdown_placed(t, c.policy, c.deadline_ms), t.wall_ms)));
    END IF;
    deadline_at := CASE c.state
        WHEN 'running' THEN coalesce(due_at, countdown_placed(t, c.policy, c.deadline_ms))
        WHEN 'expired' THEN c.expired_at_ms END;
    IF NOT due AND c.state = 'running' AND c.max_wait_ms IS NOT NULL THEN
        bound_at := countdown_placed(t, c.policy, c.start_offset_ms
            + CASE c.policy WHEN 'wall' THEN c.gap_at_start_ms ELSE 0 END + c.paused_ms + c.max_wait_ms);
    END IF;
    RETURN jsonb_build_object(
        'key', c.key, 'group', c.group_name, 'kind', c.kind, 'policy', c.policy,
        'state', CASE WHEN due THEN 'expired' ELSE c.state END,
        'duration_ms', c.duration_ms, 'elapsed_ms', elapsed, 'remaining_ms', c.duration_ms - elapsed,
        'started_at', countdown_iso8601(c.started_at_ms), 'deadline_at', countdown_iso8601(deadline_at),
        'expired_at', countdown_iso8601(coalesce(due_at, c.expired_at_ms)), 'generation', c.generation,
        'payload', countdown_payload_text(c.payload, c.payload_bytes), 'rule', c.rule,
        'max_wait_ms', c.max_wait_ms, 'bound_at', countdown_iso8601(bound_at));
END
$$;

-- An event of item `c`, numbered under its writer's lock (countdown_lock_event_writer).
CREATE FUNCTION countdown_append_event(
    lock_class integer, event_kind text, c countdowns, event_at_ms bigint, event_deadline_at_ms bigint,
    event_fired_at_ms bigint, event_late_ms bigint, with_payload boolean, event_detail text)
RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM countdown_lock_event_writer(lock_class);
    INSERT INTO countdown_events (kind, key, group_name, generation, at_ms, deadline_at_ms, fired_at_ms, late_ms,
        payload, payload_bytes, detail)
    VALUES (event_kind, c.key, c.group_name, c.generation, event_at_ms, event_deadline_at_ms, event_fired_at_ms,
        event_late_ms, CASE WHEN with_payload THEN c.payload END, CASE WHEN with_payload THEN c.payload_bytes END,
        event_detail);
END
$$;

-- Writes every column of `c` over its row.
CREATE FUNCTION countdown_write_item(c countdowns) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE countdowns SET key = c.key, group_name = c.group_name, kind = c.kind, policy = c.policy,
        state = c.state, duration_ms = c.duration_ms, generation = c.generation,
        start_offset_ms = c.start_offset_ms, gap_at_start_ms = c.gap_at_start_ms,
        started_at_ms = c.started_at_ms, paused_ms = c.paused_ms, paused_at_ms = c.paused_at_ms,
        deadline_ms = c.deadline_ms, final_elapsed_ms = c.final_elapsed_ms, ended_at_ms = c.ended_at_ms,
        expired_at_ms = c.expired_at_ms, payload = c.payload, payload_bytes = c.payload_bytes,
        updated_at_ms = c.updated_at_ms, rule = c.rule, max_wait_ms = c.max_wait_ms
    WHERE id = c.id;
END
$$;

-- The item under `item_key`, locked, as a write must see it: a countdown that came due at `t`
-- has its expiry recorded first (its row and its `expired` event), and `late_ms` says how late
-- that record is on its own timeline (NULL when nothing was recorded). No row: no such key.
CREATE FUNCTION countdown_item_for_change(
    t countdown_instant, lock_class integer, item_key text, OUT item countdowns, OUT late_ms bigint)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    timeline_ms bigint;
    due_at bigint;
BEGIN
    SELECT * INTO item FROM countdowns AS c WHERE c.key = item_key FOR UPDATE;
    IF NOT FOUND OR item.state <> 'running' OR item.deadline_ms IS NULL THEN
        RETURN;
    END IF;
    timeline_ms := countdown_timeline(t, item.policy);
    IF timeline_ms < item.deadline_ms THEN
        RETURN;
    END IF;
    late_ms := timeline_ms - item.deadline_ms;
    due_at := greatest(item.updated_at_ms,
                       least(t.wall_ms, coalesce(countdown_placed(t, item.policy, item.deadline_ms), t.wall_ms)));
    item.state := 'expired';
    item.final_elapsed_ms := item.duration_ms;
    item.expired_at_ms := due_at;
    item.paused_at_ms := NULL;
    item.deadline_ms := NULL;
    item.ended_at_ms := t.wall_ms;
    item.updated_at_ms := t.wall_ms;
    PERFORM countdown_write_item(item);
    PERFORM countdown_append_event(lock_class, 'expired', item, t.wall_ms, due_at, t.wall_ms, late_ms, true, NULL);
END
$$;

-- Starts a countdown (or, with no duration, a stopwatch) under `item_key` at `t`, with its
-- event (under a rule, 'cooldown' or 'debounce', for the library's own); the key's next generation when its item has ended or was removed. An active item is
-- left as it is (`when_active` 'refuse' or 'keep') or replaced ('replace').
-- `outcome`: 'started' (a new key), 'replaced' (an ended or active item written over),
-- 'active' (refused: `item` is the active item) or 'kept' (`item` is the active item).
-- `late_ms`: see countdown_item_for_change.
CREATE FUNCTION countdown_start_at(
    t countdown_instant, lock_class integer, item_key text, item_duration_ms bigint, item_group text,
    item_payload text, item_payload_bytes bytea, item_policy text, item_rule text, item_max_wait_ms bigint,
    when_active text, OUT outcome text, OUT item countdowns, OUT late_ms bigint)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    delay bigint := countdown_start_delay(t, item_policy);
    fresh countdowns;
    detail text := CASE WHEN item_duration_ms IS NULL THEN NULL
                        WHEN item_max_wait_ms IS NULL THEN '{"duration_ms":' || item_duration_ms || '}'
                        ELSE '{"duration_ms":' || item_duration_ms || ',"max_wait_ms":' || item_max_wait_ms || '}' END;
    looked record;
BEGIN
    fresh.key := item_key;
    fresh.group_name := item_group;
    fresh.kind := CASE WHEN item_duration_ms IS NULL THEN 'stopwatch' ELSE 'countdown' END;
    fresh.policy := item_policy;
    fresh.state := 'running';
    fresh.duration_ms := item_duration_ms;
    fresh.start_offset_ms := t.active_ms + CASE item_policy WHEN 'active' THEN delay ELSE 0 END;
    fresh.gap_at_start_ms := t.gap_ms + CASE item_policy WHEN 'wall' THEN delay ELSE 0 END;
    fresh.started_at_ms := t.wall_ms;
    fresh.paused_ms := 0;
    fresh.deadline_ms := fresh.start_offset_ms + CASE item_policy WHEN 'wall' THEN fresh.gap_at_start_ms ELSE 0 END
        + item_duration_ms;
    fresh.payload := item_payload;
    fresh.payload_bytes := item_payload_bytes;
    fresh.updated_at_ms := t.wall_ms;
    fresh.rule := item_rule;
    fresh.max_wait_ms := item_max_wait_ms;
    INSERT INTO countdowns AS c (key, group_name, kind, policy, state, duration_ms, generation, start_offset_ms,
        gap_at_start_ms, started_at_ms, paused_ms, deadline_ms, payload, payload_bytes, updated_at_ms, rule,
        max_wait_ms)
    VALUES (fresh.key, fresh.group_name, fresh.kind, fresh.policy, fresh.state, fresh.duration_ms,
        greatest(1, coalesce((SELECT r.generation + 1 FROM countdown_retired_keys AS r WHERE r.key = item_key), 0)),
        fresh.start_offset_ms, fresh.gap_at_start_ms, fresh.started_at_ms, fresh.paused_ms, fresh.deadline_ms,
        fresh.payload, fresh.payload_bytes, fresh.updated_at_ms, fresh.rule, fresh.max_wait_ms)
    ON CONFLICT (key) DO NOTHING
    RETURNING c.* INTO item;
    IF item.id IS NOT NULL THEN
        outcome := 'started';
        PERFORM countdown_append_event(lock_class,
            CASE fresh.kind WHEN 'stopwatch' THEN 'stopwatch_started' ELSE 'started' END,
            item, t.wall_ms, NULL, NULL, NULL, false, detail);
        RETURN;
    END IF;
    SELECT * INTO looked FROM countdown_item_for_change(t, lock_class, item_key);
    item := looked.item;
    late_ms := looked.late_ms;
    IF item.id IS NULL THEN
        RAISE EXCEPTION 'countdown "%" could be neither inserted nor read', item_key USING ERRCODE = '40001';
    END IF;
    IF item.state IN ('running', 'paused') AND when_active IS DISTINCT FROM 'replace' THEN
        outcome := CASE when_active WHEN 'keep' THEN 'kept' ELSE 'active' END;
        RETURN;
    END IF;
    fresh.id := item.id;
    fresh.generation := item.generation + 1;
    PERFORM countdown_write_item(fresh);
    item := fresh;
    outcome := 'replaced';
    PERFORM countdown_append_event(lock_class,
        CASE fresh.kind WHEN 'stopwatch' THEN 'stopwatch_started' ELSE 'replaced' END,
        item, t.wall_ms, NULL, NULL, NULL, false, detail);
END
$$;

-- countdown_start_at with `when_active` 'keep' for each item of `items`, a JSON array of
-- objects (key, duration_ms, group, payload or payload_base64, policy, rule, max_wait_ms), all
-- keys different: the starts a group commit of the library sends together, in one round trip.
-- The new keys go in together (one insert of the items, one of their events, in the array's
-- order); each key that exists takes countdown_start_at. One row per item, numbered from 1 in
-- the array's order (the rows come in no order: sort them by `ordinal`).
CREATE FUNCTION countdown_start_each_at(t countdown_instant, lock_class integer, items jsonb)
RETURNS TABLE (ordinal bigint, outcome text, item countdowns, late_ms bigint)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    wall_delay bigint := countdown_start_delay(t, 'wall');
    active_delay bigint := countdown_start_delay(t, 'active');
    inserted countdowns[];
    placed_at bigint[];
    asked record;
    started record;
BEGIN
    WITH wanted AS (
        SELECT a.ordinality AS position, a.value ->> 'key' AS key, a.value ->> 'group' AS group_name,
               (a.value ->> 'duration_ms')::bigint AS duration_ms, a.value ->> 'policy' AS policy,
               a.value ->> 'payload' AS payload, decode(a.value ->> 'payload_base64', 'base64') AS payload_bytes,
               a.value ->> 'rule' AS rule, (a.value ->> 'max_wait_ms')::bigint AS max_wait_ms
        FROM jsonb_array_elements(items) WITH ORDINALITY AS a
    ), placed AS (
        SELECT w.*,
               t.active_ms + CASE w.policy WHEN 'active' THEN active_delay ELSE 0 END AS start_offset_ms,
               t.gap_ms + CASE w.policy WHEN 'wall' THEN wall_delay ELSE 0 END AS gap_at_start_ms
        FROM wanted AS w
    ), added AS (
        INSERT INTO countdowns AS c (key, group_name, kind, policy, state, duration_ms, generation,
            start_offset_ms, gap_at_start_ms, started_at_ms, paused_ms, deadline_ms, payload, payload_bytes,
            updated_at_ms, rule, max_wait_ms)
        SELECT p.key, p.group_name, CASE WHEN p.duration_ms IS NULL THEN 'stopwatch' ELSE 'countdown' END,
            p.policy, 'running', p.duration_ms,
            greatest(1, coalesce((SELECT r.generation + 1 FROM countdown_retired_keys AS r WHERE r.key = p.key), 0)),
            p.start_offset_ms, p.gap_at_start_ms, t.wall_ms, 0,
            p.start_offset_ms + CASE p.policy WHEN 'wall' THEN p.gap_at_start_ms ELSE 0 END + p.duration_ms,
            p.payload, p.payload_bytes, t.wall_ms, p.rule, p.max_wait_ms
        FROM placed AS p ORDER BY p.position
        ON CONFLICT (key) DO NOTHING
        RETURNING c.*
    )
    SELECT array_agg(a ORDER BY w.position), array_agg(w.position ORDER BY w.position) INTO inserted, placed_at
    FROM added AS a JOIN wanted AS w ON w.key = a.key;
    IF inserted IS NOT NULL THEN
        PERFORM countdown_lock_event_writer(lock_class);
        INSERT INTO countdown_events (kind, key, group_name, generation, at_ms, detail)
        SELECT CASE WHEN n.kind = 'stopwatch' THEN 'stopwatch_started' ELSE 'started' END, n.key, n.group_name,
               n.generation, t.wall_ms,
               CASE WHEN n.duration_ms IS NULL THEN NULL
                    WHEN n.max_wait_ms IS NULL THEN '{"duration_ms":' || n.duration_ms || '}'
                    ELSE '{"duration_ms":' || n.duration_ms || ',"max_wait_ms":' || n.max_wait_ms || '}' END
        FROM unnest(inserted) WITH ORDINALITY AS n ORDER BY n.ordinality;
    END IF;
    -- The items inserted, then each key that exists (as it alone would take it).
    -- (Read in one pass: taking the items out of the array one subscript at a time would walk
    -- it from its start each time.)
    RETURN QUERY SELECT placed_at[u.n], 'started'::text,
        ROW(u.id, u.key, u.group_name, u.kind, u.policy, u.state, u.duration_ms, u.generation, u.start_offset_ms,
            u.gap_at_start_ms, u.started_at_ms, u.paused_ms, u.paused_at_ms, u.deadline_ms, u.final_elapsed_ms,
            u.ended_at_ms, u.expired_at_ms, u.payload, u.payload_bytes, u.updated_at_ms, u.rule,
            u.max_wait_ms)::countdowns,
        NULL::bigint
        FROM unnest(inserted) WITH ORDINALITY AS u(id, key, group_name, kind, policy, state, duration_ms, generation,
            start_offset_ms, gap_at_start_ms, started_at_ms, paused_ms, paused_at_ms, deadline_ms, final_elapsed_ms,
            ended_at_ms, expired_at_ms, payload, payload_bytes, updated_at_ms, rule, max_wait_ms, n);
    IF coalesce(array_length(inserted, 1), 0) = jsonb_array_length(items) THEN
        RETURN;
    END IF;
    FOR asked IN
        SELECT a.value, a.ordinality FROM jsonb_array_elements(items) WITH ORDINALITY AS a
        WHERE a.ordinality <> ALL (coalesce(placed_at, '{}'))
    LOOP
        SELECT * INTO started FROM countdown_start_at(t, lock_class, asked.value ->> 'key',
            (asked.value ->> 'duration_ms')::bigint, asked.value ->> 'group', asked.value ->> 'payload',
            decode(asked.value ->> 'payload_base64', 'base64'), asked.value ->> 'policy', asked.value ->> 'rule',
            (asked.value ->> 'max_wait_ms')::bigint, 'keep');
        ordinal := asked.ordinality;
        outcome := started.outcome;
        item := started.item;
        late_ms := started.late_ms;
        RETURN NEXT;
    END LOOP;
END
$$;

-- Cancels the running or paused item under `item_key` at `t`, with its event.
-- `outcome`: 'cancelled', 'not_found', or 'wrong_state' (`item` as it is, its due expiry
-- recorded). `late_ms`: see countdown_item_for_change.
CREATE FUNCTION countdown_cancel_at(
    t countdown_instant, lock_class integer, item_key text,
    OUT outcome text, OUT item countdowns, OUT late_ms bigint)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    looked record;
BEGIN
    SELECT * INTO looked FROM countdown_item_for_change(t, lock_class, item_key);
    item := looked.item;
    late_ms := looked.late_ms;
    IF item.id IS NULL THEN
        outcome := 'not_found';
        RETURN;
    END IF;
    IF item.state NOT IN ('running', 'paused') THEN
        outcome := 'wrong_state';
        RETURN;
    END IF;
    item.final_elapsed_ms := countdown_elapsed(item, t);
    item.state := 'cancelled';
    item.paused_at_ms := NULL;
    item.deadline_ms := NULL;
    item.ended_at_ms := t.wall_ms;
    item.updated_at_ms := t.wall_ms;
    PERFORM countdown_write_item(item);
    PERFORM countdown_append_event(lock_class, 'cancelled', item, t.wall_ms, NULL, NULL, NULL, false, NULL);
    outcome := 'cancelled';
END
$$;

-- Adds `by_ms` to the duration of the active countdown under `item_key` at `t`, in a new
-- generation, with its event. `outcome`: 'extended', 'not_found', 'wrong_state' (a stopwatch,
-- or an item that is not active), 'too_long' (over 100 years) or 'past_max_wait' (a debounced
-- countdown never runs past its maximum wait). `late_ms`: see countdown_item_for_change.
CREATE FUNCTION countdown_extend_at(
    t countdown_instant, lock_class integer, item_key text, by_ms bigint,
    OUT outcome text, OUT item countdowns, OUT late_ms bigint)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    new_duration bigint;
    looked record;
BEGIN
    SELECT * INTO looked FROM countdown_item_for_change(t, lock_class, item_key);
    item := looked.item;
    late_ms := looked.late_ms;
    IF item.id IS NULL THEN
        outcome := 'not_found';
        RETURN;
    END IF;
    IF item.kind <> 'countdown' OR item.state NOT IN ('running', 'paused') THEN
        outcome := 'wrong_state';
        RETURN;
    END IF;
    new_duration := coalesce(item.duration_ms, 0) + by_ms;
    IF new_duration > 36525 * 86400000::bigint THEN
        outcome := 'too_long';
        RETURN;
    END IF;
    IF item.max_wait_ms IS NOT NULL AND new_duration > item.max_wait_ms THEN
        outcome := 'past_max_wait';
        RETURN;
    END IF;
    item.duration_ms := new_duration;
    item.deadline_ms := item.deadline_ms + by_ms;
    item.generation := item.generation + 1;
    item.updated_at_ms := t.wall_ms;
    PERFORM countdown_write_item(item);
    PERFORM countdown_append_event(lock_class, 'extended', item, t.wall_ms, NULL, NULL, NULL, false,
        '{"by_ms":' || by_ms || ',"duration_ms":' || new_duration || '}');
    outcome := 'extended';
END
$$;

-- The highest event ID up to which every event is committed or never will be: the last ID
-- numbered, or, below it, the floor of the first writer of events still under way (see
-- countdown_lock_event_writer). A later statement reads events no further.
CREATE FUNCTION countdown_event_horizon(lock_class integer) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    last_id bigint := coalesce(pg_sequence_last_value('countdown_events_id_seq'::regclass), 0);
    horizon bigint := last_id;
    writer_floor bigint;
    behind bigint;
BEGIN
    FOR writer_floor IN
        SELECT objid::bigint FROM pg_locks
        WHERE locktype = 'advisory' AND classid = ((lock_class::bigint + 4294967296) % 4294967296)::oid
            AND objsubid = 2 AND granted
            AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
    LOOP
        behind := ((last_id - writer_floor) % 2147483648 + 2147483648) % 2147483648;
        IF behind < 1073741824 THEN
            horizon := least(horizon, last_id - behind);
        END IF;
    END LOOP;
    RETURN horizon;
END
$$;

-- Moves the cursor of `consumer_name` (`stored`, or `floor_id` when further) past every claim
-- acknowledged in full, up to the first one that is not, and forgets those claims.
CREATE FUNCTION countdown_move_cursor(consumer_name text, stored bigint, floor_id bigint, at_wall_ms bigint)
RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    moved bigint := greatest(stored, floor_id);
    claim countdown_consumer_claims;
BEGIN
    FOR claim IN
        SELECT * FROM countdown_consumer_claims AS k WHERE k.consumer = consumer_name ORDER BY k.first_event_id
    LOOP
        CONTINUE WHEN claim.last_event_id <= moved;
        EXIT WHEN claim.first_event_id > moved + 1;
        moved := greatest(moved, claim.acked_through);
        EXIT WHEN claim.acked_through < claim.last_event_id;
    END LOOP;
    IF moved <= stored THEN
        RETURN;
    END IF;
    DELETE FROM countdown_consumer_claims AS k WHERE k.consumer = consumer_name AND k.last_event_id <= moved;
    UPDATE countdown_consumers AS s SET last_event_id = greatest(s.last_event_id, moved), updated_at_ms = at_wall_ms
    WHERE s.name = consumer_name;
END
$$;

-- The next events for the reader `claimant_name` of the consumer `consumer_name`: the
-- unacknowledged rest of a claim that ran out, or else a new claim on the events after every
-- other claim; at most `max_events`, of the kinds, group and key asked for (NULL: any), leaving
-- out expiries of a generation the key has moved on from. The claim runs until `clock_ms` +
-- `timeout_ms` on the database's clock; the consumer's row is locked, so readers of one
-- consumer take turns. A range that held nothing for this reader is marked handled, and the
-- next is claimed (16 ranges at most). No row: nothing to claim (or no such consumer).
CREATE FUNCTION countdown_claim_at(
    consumer_name text, claimant_name text, max_events integer, clock_ms bigint, timeout_ms bigint,
    at_wall_ms bigint, lock_class integer, event_kinds text[], event_group text, event_key text)
RETURNS SETOF countdown_events
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    stored bigint;
    horizon bigint;
    lapsed countdown_consumer_claims;
    after_id bigint;
    range_last bigint;
    read_last bigint;
    given_last bigint;
    given countdown_events[];
BEGIN
    PERFORM 1 FROM countdown_consumers AS s WHERE s.name = consumer_name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    horizon := countdown_event_horizon(lock_class);
    FOR attempt IN 1..16 LOOP
        SELECT s.last_event_id INTO stored FROM countdown_consumers AS s WHERE s.name = consumer_name;
        lapsed := NULL;
        SELECT * INTO lapsed FROM countdown_consumer_claims AS k
        WHERE k.consumer = consumer_name AND k.acked_through < k.last_event_id AND k.claimed_until_ms <= clock_ms
        ORDER BY k.first_event_id LIMIT 1;
        IF lapsed.consumer IS NOT NULL THEN
            -- Its reader died or is stuck: the rest of its range goes to this one.
            after_id := lapsed.acked_through;
            range_last := lapsed.last_event_id;
        ELSE
            SELECT greatest(stored, coalesce(max(k.last_event_id), 0)) INTO after_id
            FROM countdown_consumer_claims AS k WHERE k.consumer = consumer_name;
            range_last := horizon;
            IF after_id >= horizon THEN
                RETURN;
            END IF;
        END IF;
        -- The events read (a statement of its own: its snapshot comes after the horizon's
        -- reading), and those of them given to the reader.
        SELECT max((s.e).id),
               array_agg(s.e ORDER BY (s.e).id) FILTER (WHERE
                   (event_kinds IS NULL OR (s.e).kind = ANY (event_kinds))
                   AND (event_group IS NULL OR (s.e).group_name = event_group)
                   AND (event_key IS NULL OR (s.e).key = event_key)
                   AND NOT ((s.e).kind = 'expired' AND (s.e).generation IS NOT NULL AND (s.e).generation < coalesce(
                       (SELECT c.generation FROM countdowns AS c WHERE c.key = (s.e).key),
                       (SELECT r.generation FROM countdown_retired_keys AS r WHERE r.key = (s.e).key),
                       (s.e).generation)))
        INTO read_last, given
        FROM (SELECT v FROM countdown_events AS v WHERE v.id > after_id AND v.id <= range_last
              ORDER BY v.id LIMIT max_events) AS s(e);
        IF read_last IS NULL THEN
            IF lapsed.consumer IS NOT NULL THEN
                -- Nothing left of it (retention deleted its events): handled.
                UPDATE countdown_consumer_claims AS k SET acked_through = k.last_event_id, claimant = claimant_name
                WHERE k.consumer = consumer_name AND k.first_event_id = lapsed.first_event_id;
                PERFORM countdown_move_cursor(consumer_name, stored, stored, at_wall_ms);
                CONTINUE;
            END IF;
            RETURN;
        END IF;
        given_last := coalesce((given[array_length(given, 1)]).id, read_last);
        IF lapsed.consumer IS NOT NULL THEN
            IF given_last < lapsed.last_event_id THEN
                -- The rest goes to the next reader that asks: handled where all of it was read
                -- and none of it was for a reader, else run out already.
                INSERT INTO countdown_consumer_claims (consumer, first_event_id, last_event_id, acked_through,
                    claimant, claimed_until_ms)
                VALUES (consumer_name, given_last + 1, lapsed.last_event_id,
                    CASE WHEN read_last >= lapsed.last_event_id THEN lapsed.last_event_id ELSE read_last END,
                    claimant_name, clock_ms);
            END IF;
            UPDATE countdown_consumer_claims AS k SET last_event_id = given_last, claimant = claimant_name,
                claimed_until_ms = clock_ms + timeout_ms,
                acked_through = CASE WHEN given IS NULL THEN given_last ELSE k.acked_through END
            WHERE k.consumer = consumer_name AND k.first_event_id = lapsed.first_event_id;
        ELSE
            -- A new claim on what was read for a reader: the rest is read again by the next claim.
            INSERT INTO countdown_consumer_claims (consumer, first_event_id, last_event_id, acked_through, claimant,
                claimed_until_ms)
            VALUES (consumer_name, after_id + 1, given_last,
                CASE WHEN given IS NULL THEN given_last ELSE after_id END, claimant_name, clock_ms + timeout_ms);
        END IF;
        PERFORM countdown_move_cursor(consumer_name, stored, stored, at_wall_ms);
        IF given IS NOT NULL THEN
            RETURN QUERY SELECT * FROM unnest(given);
            RETURN;
        END IF;
    END LOOP;
END
$$;

-- Records that the reader `claimant_name` handled the events of its claim up to `event_id`, and
-- renews the claim until `clock_ms` + `timeout_ms`. False, changing nothing, when the
-- acknowledgement is stale: `claimant_name` does not hold the claim on `event_id` (another reader
-- took it over, or the event was acknowledged and passed already).
CREATE FUNCTION countdown_ack_at(
    consumer_name text, claimant_name text, event_id bigint, clock_ms bigint, timeout_ms bigint, at_wall_ms bigint)
RETURNS boolean
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    stored bigint;
    owner countdown_consumer_claims;
BEGIN
    SELECT s.last_event_id INTO stored FROM countdown_consumers AS s WHERE s.name = consumer_name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    SELECT * INTO owner FROM countdown_consumer_claims AS k
    WHERE k.consumer = consumer_name AND k.first_event_id <= event_id AND event_id <= k.last_event_id;
    IF NOT FOUND OR owner.claimant <> claimant_name THEN
        RETURN false;
    END IF;
    IF owner.acked_through >= event_id THEN
        RETURN true;
    END IF;
    UPDATE countdown_consumer_claims AS k SET acked_through = event_id, claimed_until_ms = clock_ms + timeout_ms
    WHERE k.consumer = consumer_name AND k.first_event_id = owner.first_event_id;
    PERFORM countdown_move_cursor(consumer_name, stored, stored, at_wall_ms);
    RETURN true;
END
$$;

-- MARK: The public functions

-- The store's clocks now (countdown_now), refused before the store was first opened.
CREATE FUNCTION countdown_instant_now() RETURNS countdown_instant
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    t countdown_instant;
BEGIN
    SELECT n.wall_ms, n.active_ms, n.gap_ms, n.ticking, n.base_wall_ms, n.base_floor_ms, n.base_active_ms,
           n.base_gap_ms
    INTO t FROM countdown_now AS n;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the store has no clocks yet: open it once with the library or the countdown tool'
            USING ERRCODE = '55000';
    END IF;
    RETURN t;
END
$$;

-- The store's channel and event lock class (countdown_contract).
CREATE FUNCTION countdown_contract_row() RETURNS countdown_contract
LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
DECLARE
    settings countdown_contract;
BEGIN
    SELECT * INTO settings FROM countdown_contract WHERE id = 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the store has no contract row yet: open it once with the library or the countdown tool'
            USING ERRCODE = '55000';
    END IF;
    RETURN settings;
END
$$;

-- `raw` as a valid name (a key, a group, a consumer, a claimant): not empty, no control
-- character, at most `maximum_bytes` of UTF-8 once in NFC; else 22023 naming it.
CREATE FUNCTION countdown_valid_name(raw text, what text, maximum_bytes integer) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    normalized text;
    bad text;
BEGIN
    IF raw IS NULL OR raw = '' THEN
        RAISE EXCEPTION 'invalid % %: a % must not be empty', what, coalesce(quote_literal(raw), 'NULL'), what
            USING ERRCODE = '22023';
    END IF;
    bad := substring(raw FROM '[\x01-\x1f\x7f-\x9f]');
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'invalid % %: control character U+% is not allowed', what, to_json(raw)::text,
            lpad(upper(to_hex(ascii(bad))), 4, '0')
            USING ERRCODE = '22023';
    END IF;
    normalized := normalize(raw, NFC);
    IF octet_length(normalized) > maximum_bytes THEN
        RAISE EXCEPTION 'invalid % %: % bytes of UTF-8, at most % allowed', what, to_json(raw)::text,
            octet_length(normalized), maximum_bytes
            USING ERRCODE = '22023';
    END IF;
    RETURN normalized;
END
$$;

-- `amount` in whole ms, from 1 ms to 100 years; else 22023 naming it.
CREATE FUNCTION countdown_valid_duration(amount interval, what text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    ms numeric;
BEGIN
    IF amount IS NULL THEN
        RAISE EXCEPTION 'invalid % NULL: must be between 1ms and 100 years', what USING ERRCODE = '22023';
    END IF;
    ms := round(extract(epoch FROM amount) * 1000);
    IF ms < 1 OR ms > 36525 * 86400000::numeric THEN
        RAISE EXCEPTION 'invalid % %: must be between 1ms and 100 years', what, quote_literal(amount::text)
            USING ERRCODE = '22023';
    END IF;
    RETURN ms::bigint;
END
$$;

-- Starts a countdown of `duration` under `key` in the caller's transaction, counting from the
-- store's clocks now: the item as `countdown show --json` shows it. Refused when the key's
-- item is active (23505), and for bad input (22023 naming the value); a refusal changes nothing.
-- Hosts wake up at commit (NOTIFY), and nothing is seen of it before.
CREATE FUNCTION countdown_start(
    key text, duration interval, "group" text DEFAULT NULL, payload text DEFAULT NULL, policy text DEFAULT 'wall')
RETURNS jsonb
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    item_key text := countdown_valid_name(key, 'key', 256);
    item_duration_ms bigint := countdown_valid_duration(duration, 'duration');
    item_group text;
    settings countdown_contract;
    t countdown_instant;
    result record;
BEGIN
    IF "group" IS NOT NULL THEN
        item_group := countdown_valid_name("group", 'group', 128);
    END IF;
    IF octet_length(payload) > 65536 THEN
        RAISE EXCEPTION 'invalid payload: % bytes, at most 65536 allowed', octet_length(payload)
            USING ERRCODE = '22023';
    END IF;
    IF policy IS NULL OR policy NOT IN ('wall', 'active') THEN
        RAISE EXCEPTION 'invalid policy %: must be ''wall'' or ''active''', coalesce(quote_literal(policy), 'NULL')
            USING ERRCODE = '22023';
    END IF;
    settings := countdown_contract_row();
    t := countdown_instant_now();
    SELECT * INTO result FROM countdown_start_at(t, settings.event_lock_class, item_key, item_duration_ms,
        item_group, payload, NULL, policy, NULL, NULL, 'refuse');
    IF result.outcome = 'active' THEN
        RAISE EXCEPTION 'countdown % is already %', to_json(item_key)::text, (result.item).state
            USING ERRCODE = '23505', HINT = 'cancel it first, or wait until it ends';
    END IF;
    PERFORM pg_notify(settings.channel, 'deadline');
    RETURN countdown_item_json(result.item, t);
END
$$;

-- Cancels the running or paused item under `key` in the caller's transaction: the item as
-- `countdown show --json` shows it. Refused for an unknown key (P0002), an item that has
-- ended (55000) and bad input (22023); a refusal changes nothing.
CREATE FUNCTION countdown_cancel(key text) RETURNS jsonb
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    item_key text := countdown_valid_name(key, 'key', 256);
    t countdown_instant := countdown_instant_now();
    result record;
BEGIN
    SELECT * INTO result FROM countdown_cancel_at(t, (countdown_contract_row()).event_lock_class, item_key);
    IF result.outcome = 'not_found' THEN
        RAISE EXCEPTION 'no countdown %', to_json(item_key)::text USING ERRCODE = 'P0002';
    ELSIF result.outcome = 'wrong_state' THEN
        RAISE EXCEPTION 'cannot cancel %: it %', to_json(item_key)::text,
            CASE (result.item).state WHEN 'cancelled' THEN 'was cancelled' ELSE 'has expired' END
            USING ERRCODE = '55000';
    END IF;
    RETURN countdown_item_json(result.item, t);
END
$$;

-- Adds `by` to the duration of the active countdown under `key`, in a new generation, in the
-- caller's transaction: the item as `countdown show --json` shows it. Refused for an unknown
-- key (P0002), a stopwatch or an item that is not active (55000), and bad input or a duration
-- it would take past 100 years or a debounce's maximum wait (22023); a refusal changes nothing.
CREATE FUNCTION countdown_extend(key text, "by" interval) RETURNS jsonb
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    item_key text := countdown_valid_name(key, 'key', 256);
    by_ms bigint := countdown_valid_duration("by", 'extension');
    settings countdown_contract := countdown_contract_row();
    t countdown_instant := countdown_instant_now();
    result record;
BEGIN
    SELECT * INTO result FROM countdown_extend_at(t, settings.event_lock_class, item_key, by_ms);
    IF result.outcome = 'not_found' THEN
        RAISE EXCEPTION 'no countdown %', to_json(item_key)::text USING ERRCODE = 'P0002';
    ELSIF result.outcome = 'wrong_state' THEN
        RAISE EXCEPTION 'cannot extend %: %', to_json(item_key)::text,
            CASE WHEN (result.item).kind <> 'countdown' THEN 'it is a stopwatch'
                 WHEN (result.item).state = 'cancelled' THEN 'it was cancelled' ELSE 'it has expired' END
            USING ERRCODE = '55000';
    ELSIF result.outcome = 'too_long' THEN
        RAISE EXCEPTION 'cannot extend % by %: its duration would exceed 100 years', to_json(item_key)::text,
            quote_literal("by"::text) USING ERRCODE = '22023';
    ELSIF result.outcome = 'past_max_wait' THEN
        RAISE EXCEPTION 'cannot extend % by %: a debounced countdown never runs past its maximum wait (% ms)',
            to_json(item_key)::text, quote_literal("by"::text), (result.item).max_wait_ms USING ERRCODE = '22023';
    END IF;
    PERFORM pg_notify(settings.channel, 'deadline');
    RETURN countdown_item_json(result.item, t);
END
$$;

-- An event as a line of `countdown run` prints it, with its `id` (for countdown_ack).
CREATE FUNCTION countdown_event_json(e countdown_events) RETURNS jsonb
LANGUAGE sql IMMUTABLE SET search_path FROM CURRENT AS $$
    SELECT jsonb_build_object(
        'event', e.kind, 'key', e.key, 'group', e.group_name, 'generation', e.generation,
        'deadline_at', countdown_iso8601(e.deadline_at_ms), 'fired_at', countdown_iso8601(e.fired_at_ms),
        'late_ms', e.late_ms, 'payload', countdown_payload_text(e.payload, e.payload_bytes), 'id', e.id)
$$;

-- Claims the next events of the named consumer `consumer` for the reader `claimant`, in the
-- caller's transaction (READ COMMITTED): at most `max_events`, each as `countdown run` prints
-- it, plus its `id`. The claim runs for `claim_for` on the database's clock, renewed by each
-- acknowledgement; if it runs out, another reader gets the events not acknowledged. A consumer
-- that does not exist yet is created at the first event retained. No row: nothing to claim now.
CREATE FUNCTION countdown_claim(
    consumer text, claimant text, max_events integer DEFAULT 100, claim_for interval DEFAULT interval '30 seconds')
RETURNS SETOF jsonb
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    consumer_name text := countdown_valid_name(consumer, 'consumer name', 256);
    claimant_name text := countdown_valid_name(claimant, 'claimant', 256);
    timeout_ms bigint := countdown_valid_duration(claim_for, 'claim duration');
    wall_ms bigint := (countdown_instant_now()).wall_ms;
BEGIN
    IF max_events IS NULL OR max_events NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'invalid max_events %: must be between 1 and 10000', coalesce(max_events::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'countdown_claim needs a READ COMMITTED transaction, not %',
            upper(current_setting('transaction_isolation'))
            USING ERRCODE = '25000', HINT = 'a snapshot older than the claim could miss events committed before it';
    END IF;
    INSERT INTO countdown_consumers AS s (name, last_event_id, updated_at_ms) VALUES (consumer_name, 0, wall_ms)
    ON CONFLICT (name) DO NOTHING;
    RETURN QUERY
    SELECT countdown_event_json(e)
    FROM countdown_claim_at(consumer_name, claimant_name, max_events,
        floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint, timeout_ms, wall_ms,
        (countdown_contract_row()).event_lock_class, NULL, NULL, NULL) AS e;
END
$$;

-- Acknowledges, for the reader `claimant` of the consumer `consumer`, every event of its claim
-- up to `event_id`, in the caller's transaction, and renews the claim for `claim_for`. False when the claim was lost (another reader
-- took it over, or the event was passed already): the caller rolls back its own writes.
CREATE FUNCTION countdown_ack(
    consumer text, claimant text, event_id bigint, claim_for interval DEFAULT interval '30 seconds')
RETURNS boolean
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    consumer_name text := countdown_valid_name(consumer, 'consumer name', 256);
    claimant_name text := countdown_valid_name(claimant, 'claimant', 256);
    timeout_ms bigint := countdown_valid_duration(claim_for, 'claim duration');
BEGIN
    IF event_id IS NULL OR event_id < 1 THEN
        RAISE EXCEPTION 'invalid event_id %: must be a positive event id', coalesce(event_id::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    RETURN countdown_ack_at(consumer_name, claimant_name, event_id,
        floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint, timeout_ms,
        (countdown_instant_now()).wall_ms);
END
$$;
