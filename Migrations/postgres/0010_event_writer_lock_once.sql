-- CountdownStore schema, part 10 (PostgreSQL only): a transaction takes its event writer's lock
-- once, however many events it appends.
--
-- The lock's second key is the last event ID numbered before the writer's first event: its
-- floor, below every ID it takes. A later call in the same transaction would lock a higher floor,
-- which the first lock already covers, and each lock is held to the commit: a host starting tens
-- of thousands of countdowns in one transaction (through countdown_start, in a loop of its own)
-- ran out of the server's lock table. The first call now notes its lock in a setting local to
-- the transaction (a savepoint rolled back takes the note back with its lock), and later calls
-- take none.
CREATE OR REPLACE FUNCTION countdown_lock_event_writer(lock_class integer) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    noted text := 'countdown.event_writer_' || replace(lock_class::text, '-', 'n');
BEGIN
    IF coalesce(current_setting(noted, true), '') = txid_current()::text THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(
        lock_class, (coalesce(pg_sequence_last_value('countdown_events_id_seq'::regclass), 0) % 2147483648)::integer);
    PERFORM set_config(noted, txid_current()::text, true);
END
$$;
