-- A claim used to move each message it took from `queued` to `sending`. `status` is
-- indexed, so that write could never be HOT: every claim wrote a whole new row version and
-- an entry in each of the table's indexes, the largest part of the claim's cost. Now a
-- claim writes only the lease (`lease_token`, `locked_until`, `claims_without_outcome`),
-- columns no index names, so the new version can stay on its page (a HOT update) and no
-- index is touched. A message in flight is stored as `queued` with a lease; `sending` is
-- what the API, the counters and the metrics call such a row, never a stored value.
-- docs/performance.md ("Design choices, measured") has the figures and the trade.

-- The one definition of a message's state as the API names it, for SQL that counts by
-- state (a plain SQL function: the planner inlines it).
CREATE FUNCTION message_state(status text, lease_token uuid) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE WHEN status = 'queued' AND lease_token IS NOT NULL
                      THEN 'sending' ELSE status END $$;

-- The announcement counters count states, so a claim still moves one from `queued` to
-- `sending` and a renewal moves nothing (migration 25 has how the triggers work).
CREATE OR REPLACE FUNCTION announcement_counters_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO announcement_counters AS c
        (account_id, announcement_id, slot, queued, sending, sent, failed, bounced, skipped)
    SELECT account_id, announcement_id, pg_backend_pid(),
           count(*) FILTER (WHERE state = 'queued'),
           count(*) FILTER (WHERE state = 'sending'),
           count(*) FILTER (WHERE state = 'sent'),
           count(*) FILTER (WHERE state = 'failed'),
           count(*) FILTER (WHERE state = 'bounced'),
           count(*) FILTER (WHERE state = 'skipped')
    FROM (SELECT account_id, announcement_id, message_state(status, lease_token) AS state
          FROM inserted_rows WHERE announcement_id IS NOT NULL) AS r
    GROUP BY account_id, announcement_id
    ORDER BY account_id, announcement_id
    ON CONFLICT (account_id, announcement_id, slot) DO UPDATE SET
        queued = c.queued + EXCLUDED.queued,
        sending = c.sending + EXCLUDED.sending,
        sent = c.sent + EXCLUDED.sent,
        failed = c.failed + EXCLUDED.failed,
        bounced = c.bounced + EXCLUDED.bounced,
        skipped = c.skipped + EXCLUDED.skipped;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION announcement_counters_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM new_rows WHERE announcement_id IS NOT NULL)
       AND NOT EXISTS (SELECT FROM old_rows WHERE announcement_id IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    INSERT INTO announcement_counters AS c
        (account_id, announcement_id, slot, queued, sending, sent, failed, bounced, skipped)
    SELECT g.* FROM (
        SELECT d.account_id, d.announcement_id, pg_backend_pid(),
               coalesce(sum(d.n) FILTER (WHERE d.state = 'queued'), 0) AS queued,
               coalesce(sum(d.n) FILTER (WHERE d.state = 'sending'), 0) AS sending,
               coalesce(sum(d.n) FILTER (WHERE d.state = 'sent'), 0) AS sent,
               coalesce(sum(d.n) FILTER (WHERE d.state = 'failed'), 0) AS failed,
               coalesce(sum(d.n) FILTER (WHERE d.state = 'bounced'), 0) AS bounced,
               coalesce(sum(d.n) FILTER (WHERE d.state = 'skipped'), 0) AS skipped
        FROM (SELECT account_id, announcement_id, message_state(status, lease_token) AS state,
                     1 AS n FROM new_rows
              WHERE announcement_id IS NOT NULL
              UNION ALL
              SELECT account_id, announcement_id, message_state(status, lease_token), -1
              FROM old_rows
              WHERE announcement_id IS NOT NULL) AS d
        GROUP BY d.account_id, d.announcement_id) AS g
    WHERE (g.queued, g.sending, g.sent, g.failed, g.bounced, g.skipped) <> (0, 0, 0, 0, 0, 0)
    ORDER BY g.account_id, g.announcement_id
    ON CONFLICT (account_id, announcement_id, slot) DO UPDATE SET
        queued = c.queued + EXCLUDED.queued,
        sending = c.sending + EXCLUDED.sending,
        sent = c.sent + EXCLUDED.sent,
        failed = c.failed + EXCLUDED.failed,
        bounced = c.bounced + EXCLUDED.bounced,
        skipped = c.skipped + EXCLUDED.skipped;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION announcement_counters_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO announcement_counters AS c
        (account_id, announcement_id, slot, queued, sending, sent, failed, bounced, skipped)
    SELECT g.* FROM (
        SELECT account_id, announcement_id, pg_backend_pid(),
               -count(*) FILTER (WHERE state = 'queued'),
               -count(*) FILTER (WHERE state = 'sending'),
               -count(*) FILTER (WHERE state = 'sent'),
               -count(*) FILTER (WHERE state = 'failed'),
               -count(*) FILTER (WHERE state = 'bounced'),
               -count(*) FILTER (WHERE state = 'skipped')
        FROM (SELECT account_id, announcement_id, message_state(status, lease_token) AS state
              FROM deleted_rows WHERE announcement_id IS NOT NULL) AS r
        GROUP BY account_id, announcement_id) AS g
    WHERE EXISTS (SELECT FROM announcements a
                  WHERE a.account_id = g.account_id AND a.id = g.announcement_id)
    ORDER BY g.account_id, g.announcement_id
    ON CONFLICT (account_id, announcement_id, slot) DO UPDATE SET
        queued = c.queued + EXCLUDED.queued,
        sending = c.sending + EXCLUDED.sending,
        sent = c.sent + EXCLUDED.sent,
        failed = c.failed + EXCLUDED.failed,
        bounced = c.bounced + EXCLUDED.bounced,
        skipped = c.skipped + EXCLUDED.skipped;
    RETURN NULL;
END
$$;

-- A lane is brought forward by rows that wait for a worker, not by rows in flight: a
-- claim or a lease renewal (both leave the row `queued`) must not make the lane due.
CREATE OR REPLACE FUNCTION delivery_lanes_bring_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO delivery_lanes AS lane (account_id, next_due_at)
    SELECT account_id, min(next_attempt_at) FROM queued_rows
    WHERE status = 'queued' AND lease_token IS NULL
    GROUP BY account_id
    ORDER BY account_id
    ON CONFLICT (account_id) DO UPDATE
        SET next_due_at = least(lane.next_due_at, EXCLUDED.next_due_at)
        WHERE lane.next_due_at IS NULL OR lane.next_due_at > EXCLUDED.next_due_at;
    RETURN NULL;
END
$$;

-- Messages in flight now: stored as `queued`, lease kept (with the functions above
-- already in place, the counters see no change and no lane moves).
UPDATE messages SET status = 'queued' WHERE status = 'sending';

ALTER TABLE messages DROP CONSTRAINT messages_status_check;
ALTER TABLE messages ADD CONSTRAINT messages_status_check
    CHECK (status IN ('queued', 'sent', 'failed', 'bounced', 'skipped'));
ALTER TABLE messages DROP CONSTRAINT messages_due_check;
ALTER TABLE messages ADD CONSTRAINT messages_due_check
    CHECK ((status = 'queued') = (next_attempt_at IS NOT NULL));

-- The partial indexes name only the stored pending status. In-flight rows stay in the due
-- index (the claim steps over their live leases, and the lane reschedule reads their
-- lease ends from it), so the index of leased rows has no reader left; it named
-- `lease_token`, which would keep the claim from being HOT.
DROP INDEX messages_account_leased_idx;
DROP INDEX messages_account_due_idx;
CREATE INDEX messages_account_due_idx ON messages (account_id, next_attempt_at)
    WHERE status = 'queued';
DROP INDEX messages_announcement_pending_idx;
CREATE INDEX messages_announcement_pending_idx ON messages (account_id, announcement_id)
    WHERE announcement_id IS NOT NULL AND status = 'queued';

-- Room for the claim's new version on the row's own page (new pages only). A claim takes
-- a page's rows together, in due order, within one statement, so none of the versions it
-- replaces can be pruned before it ends: half of each page is kept free. The record's
-- version then takes the room the claim's dead one leaves once pruned. Measured, the
-- table ends no larger than at the default, whose non-HOT versions all go to new pages.
ALTER TABLE messages SET (fillfactor = 50);
