-- CountdownStore schema, part 3 (PostgreSQL only): the statements every write sends, as
-- PL/pgSQL functions, so the server plans them once per connection instead of once per
-- transaction (prepared statements would do the same, but PgBouncer's transaction pooling
-- does not keep them). Each function runs on the search path it was created with: the store's
-- schema. SQLite has no such functions: it plans nothing across a network.

-- The lock a writer of events takes before it numbers its first event: shared (writers never
-- wait for one another), its first key the store's events class, its second the writer's
-- floor, the last event ID numbered so far modulo 2^31 (every ID the writer takes is above it).
-- It is held until the writer commits or rolls back. A reader of events reads no further than
-- the lowest floor of the writers holding one, so it never sees a higher ID before a lower one
-- that commits later.
CREATE FUNCTION countdown_lock_event_writer(lock_class integer) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(
        lock_class, (coalesce(pg_sequence_last_value('countdown_events_id_seq'::regclass), 0) % 2147483648)::integer);
END
$$;

-- The checkpoint, the lease, the soonest deadline of each timeline and the server's clock, in
-- one row (no row before the store's first checkpoint).
CREATE FUNCTION countdown_clocks() RETURNS TABLE (
    created_at_ms bigint, active_ms bigint, gap_ms bigint, heartbeat_at_ms bigint, heartbeat_boot_ms bigint,
    boot_id text, wall_floor_ms bigint, suspended boolean, calibration_offset_ms bigint, calibrated_at_ms bigint,
    clock_skew_ms bigint, holder text, acquired_at_ms bigint, expires_at_ms bigint,
    soonest_wall_ms bigint, soonest_active_ms bigint, server_ms bigint)
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
        floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
    FROM countdown_clock AS c LEFT JOIN countdown_lease AS l ON l.id = 1
    WHERE c.id = 1;
END
$$;

-- A new item, its generation following its key's retired one if any, and its event (of that
-- generation), with a NOTIFY when `channel` is not null; nothing when the key exists. Returns
-- the new item's id and generation.
CREATE FUNCTION countdown_insert_with_event(
    item_key text, item_group text, item_kind text, item_policy text, item_state text,
    item_duration_ms bigint, item_generation bigint, item_start_offset_ms bigint, item_gap_at_start_ms bigint,
    item_started_at_ms bigint, item_paused_ms bigint, item_paused_at_ms bigint, item_deadline_ms bigint,
    item_final_elapsed_ms bigint, item_ended_at_ms bigint, item_expired_at_ms bigint,
    item_payload text, item_payload_bytes bytea, item_updated_at_ms bigint,
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
        expired_at_ms, payload, payload_bytes, updated_at_ms)
    VALUES (item_key, item_group, item_kind, item_policy, item_state, item_duration_ms,
        greatest(item_generation,
                 coalesce((SELECT r.generation + 1 FROM countdown_retired_keys AS r WHERE r.key = item_key), 0)),
        item_start_offset_ms, item_gap_at_start_ms, item_started_at_ms, item_paused_ms, item_paused_at_ms,
        item_deadline_ms, item_final_elapsed_ms, item_ended_at_ms, item_expired_at_ms, item_payload,
        item_payload_bytes, item_updated_at_ms)
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
