-- CountdownStore schema, part 1: tables and indexes.
--
-- All times are integer milliseconds. Three clocks (SPEC section 3):
--   W  the store wall clock: UTC epoch ms (system clock + calibration offset),
--      advanced by the boot clock inside one boot, never backwards;
--   A  the active timeline: ms during which a host held the store with its ticker running;
--   G  the cumulative background gap: ms spent suspended or not running at all.
-- A `wall` item runs on A + G, an `active` item on A alone: that is the item's own timeline.

-- Countdowns and stopwatches, one row per key.
CREATE TABLE countdowns (
    id               INTEGER PRIMARY KEY,
    key              TEXT    NOT NULL UNIQUE
                             CHECK (typeof(key) = 'text' AND length(CAST(key AS BLOB)) BETWEEN 1 AND 256),
    group_name       TEXT    CHECK (group_name IS NULL OR
                                    (typeof(group_name) = 'text' AND length(CAST(group_name AS BLOB)) BETWEEN 1 AND 128)),
    kind             TEXT    NOT NULL CHECK (kind IN ('countdown', 'stopwatch')),
    policy           TEXT    NOT NULL CHECK (policy IN ('wall', 'active')),
    state            TEXT    NOT NULL CHECK (state IN ('running', 'paused', 'expired', 'cancelled')),
    duration_ms      INTEGER CHECK ((kind = 'stopwatch') = (duration_ms IS NULL)),
    generation       INTEGER NOT NULL DEFAULT 1,   -- bumped by restart, extend, shorten and replace
    start_offset_ms  INTEGER NOT NULL,             -- A when the item started
    gap_at_start_ms  INTEGER NOT NULL,             -- G when the item started
    started_at_ms    INTEGER NOT NULL,             -- W when the item started
    paused_ms        INTEGER NOT NULL DEFAULT 0,   -- total paused time, on the item's own timeline
    paused_at_ms     INTEGER,                      -- the item's own timeline when the current pause began
    deadline_ms      INTEGER,                      -- the item's own timeline at which a countdown is due
    final_elapsed_ms INTEGER,                      -- elapsed when the item ended (expired or cancelled)
    ended_at_ms      INTEGER,                      -- W when the item ended
    expired_at_ms    INTEGER,                      -- W when the item expired
    payload,                                       -- text or bytes owned by the caller
    updated_at_ms    INTEGER NOT NULL              -- W of the last change
);

-- The next deadline and the soonest running items: wall and active items each in deadline order.
CREATE INDEX countdowns_running_by_deadline
    ON countdowns (policy, deadline_ms, key)
    WHERE state = 'running' AND deadline_ms IS NOT NULL;

CREATE INDEX countdowns_running_by_group
    ON countdowns (group_name, policy, deadline_ms, key)
    WHERE state = 'running' AND deadline_ms IS NOT NULL;

-- Paused countdowns in order of their frozen remaining time.
CREATE INDEX countdowns_paused_by_remaining
    ON countdowns (deadline_ms - paused_at_ms, key)
    WHERE state = 'paused' AND deadline_ms IS NOT NULL;

CREATE INDEX countdowns_paused_by_group
    ON countdowns (group_name, deadline_ms - paused_at_ms, key)
    WHERE state = 'paused' AND deadline_ms IS NOT NULL;

CREATE INDEX countdowns_expired_by_time
    ON countdowns (expired_at_ms)
    WHERE state = 'expired';

CREATE INDEX countdowns_by_state_group
    ON countdowns (state, group_name);

-- The store's clocks at the last checkpoint: one row. Every write transaction and every
-- heartbeat moves it forward; anyone can extrapolate the clocks from it (see countdown_now).
CREATE TABLE countdown_clock (
    id                    INTEGER PRIMARY KEY CHECK (id = 1),
    created_at_ms         INTEGER NOT NULL,            -- W when the store was created
    active_ms             INTEGER NOT NULL,            -- A at the checkpoint
    gap_ms                INTEGER NOT NULL,            -- G at the checkpoint
    heartbeat_at_ms       INTEGER NOT NULL,            -- W at the checkpoint: the last heartbeat
    heartbeat_boot_ms     INTEGER NOT NULL,            -- the boot clock at the checkpoint
    boot_id               TEXT,                        -- the boot the checkpoint was taken in
    wall_floor_ms         INTEGER NOT NULL,            -- W never reads below this
    suspended             INTEGER NOT NULL DEFAULT 0 CHECK (suspended IN (0, 1)),
    calibration_offset_ms INTEGER NOT NULL DEFAULT 0,  -- trusted time − system clock
    calibrated_at_ms      INTEGER,                     -- W of the last calibration
    clock_skew_ms         INTEGER NOT NULL DEFAULT 0   -- (system clock + offset) − W, as last reported
);

-- Which process's ticker advances the active timeline and fires expiries.
CREATE TABLE countdown_lease (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    holder         TEXT,
    acquired_at_ms INTEGER,
    expires_at_ms  INTEGER NOT NULL DEFAULT 0           -- W after which the lease is free
);
INSERT INTO countdown_lease (id, holder, acquired_at_ms, expires_at_ms) VALUES (1, NULL, NULL, 0);

-- Everything that happened, in order: operations, expiries, clock events.
CREATE TABLE countdown_events (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    kind           TEXT    NOT NULL,
    key            TEXT,
    group_name     TEXT,
    generation     INTEGER,
    at_ms          INTEGER NOT NULL,   -- W when the event was recorded
    deadline_at_ms INTEGER,            -- expiries: W at which the item came due
    fired_at_ms    INTEGER,            -- expiries: W at which it was marked expired
    late_ms        INTEGER,            -- expiries: fired_at − deadline_at on the item's own timeline
    payload,                           -- expiries: the item's payload
    detail         TEXT                -- a JSON object with figures specific to the kind
);

-- The last generation of each removed key: an item created again under the key continues from it,
-- so a generation names one life of a key forever and an old expiry can never pass for a new one.
CREATE TABLE countdown_retired_keys (
    key           TEXT    PRIMARY KEY,
    generation    INTEGER NOT NULL,
    removed_at_ms INTEGER NOT NULL
);

-- Named consumers of events and how far each has acknowledged.
CREATE TABLE countdown_consumers (
    name          TEXT    PRIMARY KEY,
    last_event_id INTEGER NOT NULL DEFAULT 0,
    updated_at_ms INTEGER NOT NULL
);
