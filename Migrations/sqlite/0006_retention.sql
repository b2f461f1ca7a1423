-- CountdownStore schema, part 6: retention in small batches, and a checkpoint that may pass
-- expiries still to record.
--
-- Retention deletes ended items, old events and retired keys a batch at a time, oldest first:
-- each batch finds its rows through an index instead of scanning the table.
--
-- A due countdown not yet recorded is placed on W from the clock row's checkpoint, forwards when
-- it came due after it and backwards when before (the views already do both). A write moves the
-- checkpoint past such a countdown only when the move keeps W − timeline (A + G for `wall`, A for
-- `active`) as it was, so the instant it reached zero stays where every reader saw it; expiries
-- are then recorded in short transactions, however many came due at once.

-- Expired and cancelled items by the instant they ended: what retention deletes first.
CREATE INDEX countdowns_ended_by_time
    ON countdowns (ended_at_ms)
    WHERE state IN ('expired', 'cancelled');

-- Retired keys by the instant they were removed: those older than every remaining event protect
-- nothing any more (no event names an older generation of the key).
CREATE INDEX countdown_retired_keys_by_time
    ON countdown_retired_keys (removed_at_ms);
