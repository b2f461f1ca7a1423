-- CountdownStore schema, part 3: indexes for the listings that part 1 left to a sort.
--
-- Every listing walks an index already in its order and stops at its limit, so its cost grows
-- with the page size, not with the number of items stored.

-- Running and paused stopwatches by key (they come after the countdowns in `active`).
CREATE INDEX countdowns_active_stopwatches
    ON countdowns (key)
    WHERE kind = 'stopwatch' AND state IN ('running', 'paused');

CREATE INDEX countdowns_active_stopwatches_by_group
    ON countdowns (group_name, key)
    WHERE kind = 'stopwatch' AND state IN ('running', 'paused');

-- Cancelled items, most recently cancelled first.
CREATE INDEX countdowns_cancelled_by_time
    ON countdowns (ended_at_ms)
    WHERE state = 'cancelled';

CREATE INDEX countdowns_cancelled_by_group
    ON countdowns (group_name, ended_at_ms)
    WHERE state = 'cancelled';

-- Expired items of one group, most recent first (part 1 orders them for all groups).
CREATE INDEX countdowns_expired_by_group
    ON countdowns (group_name, expired_at_ms)
    WHERE state = 'expired';
