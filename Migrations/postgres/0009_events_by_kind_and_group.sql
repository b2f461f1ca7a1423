-- CountdownStore schema, part 9 (PostgreSQL): the events by kind, and by group and kind.
--
-- A named consumer that delivers some kinds (`countdown run`: expiries) or one group claims its
-- events through these indexes, one range for each kind, so that it never reads the events of
-- other kinds or groups, however many came first: countdown_claim_at reads them so. Events of
-- no group are not in the index by group.

CREATE INDEX countdown_events_by_kind ON countdown_events (kind, id);

CREATE INDEX countdown_events_by_group
    ON countdown_events (group_name, kind, id)
    WHERE group_name IS NOT NULL;

-- countdown_claim_at as part 8 wrote it, reading a reader's kinds through the indexes above.
CREATE OR REPLACE FUNCTION countdown_claim_at(
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
    read_count bigint;
    read_max bigint;
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
        -- reading), and those of them given to the reader. A reader of some kinds reads one
        -- range of an index for each kind (of its group, with a group), merged by id: never the
        -- events of other kinds or groups. Every event up to the last of a full batch was read,
        -- or, short of a full batch, every event of the range.
        IF event_kinds IS NULL THEN
            SELECT max((s.e).id), array_agg(s.e ORDER BY (s.e).id) FILTER (WHERE
                       (event_group IS NULL OR (s.e).group_name = event_group)
                       AND (event_key IS NULL OR (s.e).key = event_key)
                       AND NOT ((s.e).kind = 'expired' AND (s.e).generation IS NOT NULL AND (s.e).generation < coalesce(
                           (SELECT c.generation FROM countdowns AS c WHERE c.key = (s.e).key),
                           (SELECT r.generation FROM countdown_retired_keys AS r WHERE r.key = (s.e).key),
                           (s.e).generation)))
            INTO read_last, given
            FROM (SELECT v FROM countdown_events AS v WHERE v.id > after_id AND v.id <= range_last
                  ORDER BY v.id LIMIT max_events) AS s(e);
        ELSIF event_group IS NULL THEN
            SELECT count(*), max((s.e).id), array_agg(s.e ORDER BY (s.e).id) FILTER (WHERE
                       (event_key IS NULL OR (s.e).key = event_key) AND NOT ((s.e).kind = 'expired' AND (s.e).generation IS NOT NULL AND (s.e).generation < coalesce(
                           (SELECT c.generation FROM countdowns AS c WHERE c.key = (s.e).key),
                           (SELECT r.generation FROM countdown_retired_keys AS r WHERE r.key = (s.e).key),
                           (s.e).generation)))
            INTO read_count, read_max, given
            FROM (SELECT r.v FROM unnest(event_kinds) AS k(kind) CROSS JOIN LATERAL (
                      SELECT v FROM countdown_events AS v
                      WHERE v.kind = k.kind AND v.id > after_id AND v.id <= range_last
                      ORDER BY v.id LIMIT max_events) AS r
                  ORDER BY (r.v).id LIMIT max_events) AS s(e);
            read_last := CASE WHEN read_count >= max_events THEN read_max ELSE range_last END;
        ELSE
            SELECT count(*), max((s.e).id), array_agg(s.e ORDER BY (s.e).id) FILTER (WHERE
                       (event_key IS NULL OR (s.e).key = event_key) AND NOT ((s.e).kind = 'expired' AND (s.e).generation IS NOT NULL AND (s.e).generation < coalesce(
                           (SELECT c.generation FROM countdowns AS c WHERE c.key = (s.e).key),
                           (SELECT r.generation FROM countdown_retired_keys AS r WHERE r.key = (s.e).key),
                           (s.e).generation)))
            INTO read_count, read_max, given
            FROM (SELECT r.v FROM unnest(event_kinds) AS k(kind) CROSS JOIN LATERAL (
                      SELECT v FROM countdown_events AS v
                      WHERE v.group_name = event_group AND v.kind = k.kind AND v.id > after_id
                          AND v.id <= range_last
                      ORDER BY v.id LIMIT max_events) AS r
                  ORDER BY (r.v).id LIMIT max_events) AS s(e);
            read_last := CASE WHEN read_count >= max_events THEN read_max ELSE range_last END;
        END IF;
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
