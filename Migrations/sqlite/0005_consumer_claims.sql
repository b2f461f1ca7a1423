-- CountdownStore schema, part 5: named consumers shared by several readers.
--
-- Several processes (or tasks) may read one named consumer. Each takes a claim on the next range
-- of events, so each event goes to one reader; a claim that runs out before its reader has
-- acknowledged it goes to the next reader that asks. The consumer's cursor (`last_event_id` in
-- `countdown_consumers`) moves past a range once every claim before it is acknowledged.

-- Ranges of events taken by a reader of a named consumer, from the oldest not yet acknowledged.
CREATE TABLE countdown_consumer_claims (
    consumer         TEXT    NOT NULL,  -- the consumer's name
    first_event_id   INTEGER NOT NULL,  -- the range's first event id
    last_event_id    INTEGER NOT NULL,  -- its last event id
    acked_through    INTEGER NOT NULL,  -- acknowledged up to this id (first_event_id - 1: none)
    claimant         TEXT    NOT NULL,  -- the reader holding it: host:pid:id:reader
    claimed_until_ms INTEGER NOT NULL,  -- store wall clock when another reader may take it over
    PRIMARY KEY (consumer, first_event_id)
) WITHOUT ROWID;
