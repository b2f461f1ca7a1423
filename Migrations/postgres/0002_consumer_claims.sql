-- CountdownStore schema, part 2: named consumers shared by several readers (a fleet of hosts).
--
-- Several hosts (or tasks) may read one named consumer. Each takes a claim on the next range of
-- events, so each event goes to one reader; a claim that runs out before its reader has
-- acknowledged it goes to the next reader that asks. The consumer's cursor (`last_event_id` in
-- `countdown_consumers`) moves past a range once every claim before it is acknowledged.

CREATE TABLE countdown_consumer_claims (
    consumer         text   NOT NULL,
    first_event_id   bigint NOT NULL,
    last_event_id    bigint NOT NULL,
    acked_through    bigint NOT NULL,
    claimant         text   NOT NULL,
    claimed_until_ms bigint NOT NULL,
    PRIMARY KEY (consumer, first_event_id)
);

COMMENT ON TABLE countdown_consumer_claims IS 'Ranges of events taken by a reader of a named consumer, from the oldest not yet acknowledged.';
COMMENT ON COLUMN countdown_consumer_claims.acked_through IS 'Acknowledged up to this event id (first_event_id - 1: none).';
COMMENT ON COLUMN countdown_consumer_claims.claimant IS 'The reader holding the claim: host:pid:id:reader.';
COMMENT ON COLUMN countdown_consumer_claims.claimed_until_ms IS 'Store wall clock (the database''s) at which another reader may take it over.';
