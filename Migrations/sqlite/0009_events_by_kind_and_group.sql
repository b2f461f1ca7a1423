-- CountdownStore schema, part 9: the events by kind, and by group and kind.
--
-- A named consumer that delivers some kinds (`countdown run`: expiries) or one group claims its
-- events through these indexes, one range for each kind, so that it never reads the events of
-- other kinds or groups, however many came first. Events of no group are not in the index by
-- group.

CREATE INDEX countdown_events_by_kind ON countdown_events (kind, id);

CREATE INDEX countdown_events_by_group
    ON countdown_events (group_name, kind, id)
    WHERE group_name IS NOT NULL;
