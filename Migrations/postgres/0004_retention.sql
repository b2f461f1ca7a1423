-- CountdownStore schema, part 4: retention in small batches (as SQLite's part 6).
--
-- Retention deletes ended items, old events and retired keys a batch at a time, oldest first:
-- each batch finds its rows through an index instead of scanning the table, and autovacuum
-- keeps up with batches of this size.

-- Expired and cancelled items by the instant they ended: what retention deletes first.
CREATE INDEX countdowns_ended_by_time
    ON countdowns (ended_at_ms)
    WHERE state IN ('expired', 'cancelled');

-- Retired keys by the instant they were removed: those older than every remaining event protect
-- nothing any more (no event names an older generation of the key).
CREATE INDEX countdown_retired_keys_by_time
    ON countdown_retired_keys (removed_at_ms);
