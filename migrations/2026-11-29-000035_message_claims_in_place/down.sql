-- Back to claims that move a message to `sending` (migrations 14, 25 and 28).
ALTER TABLE messages RESET (fillfactor);

ALTER TABLE messages DROP CONSTRAINT messages_status_check;
ALTER TABLE messages ADD CONSTRAINT messages_status_check
    CHECK (status IN ('queued', 'sending', 'sent', 'failed', 'bounced', 'skipped'));
ALTER TABLE messages DROP CONSTRAINT messages_due_check;
ALTER TABLE messages ADD CONSTRAINT messages_due_check
    CHECK ((status IN ('queued', 'sending')) = (next_attempt_at IS NOT NULL));

-- In-flight rows back to `sending` while this migration's counter functions still run:
-- they see these rows as `sending` before and after, so no count moves.
UPDATE messages SET status = 'sending' WHERE status = 'queued' AND lease_token IS NOT NULL;

DROP INDEX messages_announcement_pending_idx;
CREATE INDEX messages_announcement_pending_idx ON messages (account_id, announcement_id)
    WHERE announcement_id IS NOT NULL AND status IN ('queued', 'sending');
DROP INDEX messages_account_due_idx;
CREATE INDEX messages_account_due_idx ON messages (account_id, next_attempt_at)
    WHERE status IN ('queued', 'sending');
CREATE INDEX messages_account_leased_idx ON messages (account_id) WHERE lease_token IS NOT NULL;

-- The functions of migrations 14 and 25.
CREATE OR REPLACE FUNCTION delivery_lanes_bring_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO delivery_lanes AS lane (account_id, next_due_at)
    SELECT account_id, min(next_attempt_at) FROM queued_rows
    WHERE status = 'queued'
    GROUP BY account_id
    ORDER BY account_id
    ON CONFLICT (account_id) DO UPDATE
        SET next_due_at = least(lane.next_due_at, EXCLUDED.next_due_at)
        WHERE lane.next_due_at IS NULL OR lane.next_due_at > EXCLUDED.next_due_at;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION announcement_counters_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO announcement_counters AS c
        (account_id, announcement_id, slot, queued, sending, sent, failed, bounced, skipped)
    SELECT account_id, announcement_id, pg_backend_pid(),
           count(*) FILTER (WHERE status = 'queued'),
           count(*) FILTER (WHERE status = 'sending'),
           count(*) FILTER (WHERE status = 'sent'),
           count(*) FILTER (WHERE status = 'failed'),
           count(*) FILTER (WHERE status = 'bounced'),
           count(*) FILTER (WHERE status = 'skipped')
    FROM inserted_rows
    WHERE announcement_id IS NOT NULL
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
               coalesce(sum(d.n) FILTER (WHERE d.status = 'queued'), 0) AS queued,
               coalesce(sum(d.n) FILTER (WHERE d.status = 'sending'), 0) AS sending,
               coalesce(sum(d.n) FILTER (WHERE d.status = 'sent'), 0) AS sent,
               coalesce(sum(d.n) FILTER (WHERE d.status = 'failed'), 0) AS failed,
               coalesce(sum(d.n) FILTER (WHERE d.status = 'bounced'), 0) AS bounced,
               coalesce(sum(d.n) FILTER (WHERE d.status = 'skipped'), 0) AS skipped
        FROM (SELECT account_id, announcement_id, status, 1 AS n FROM new_rows
              WHERE announcement_id IS NOT NULL
              UNION ALL
              SELECT account_id, announcement_id, status, -1 FROM old_rows
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
               -count(*) FILTER (WHERE status = 'queued'),
               -count(*) FILTER (WHERE status = 'sending'),
               -count(*) FILTER (WHERE status = 'sent'),
               -count(*) FILTER (WHERE status = 'failed'),
               -count(*) FILTER (WHERE status = 'bounced'),
               -count(*) FILTER (WHERE status = 'skipped')
        FROM deleted_rows
        WHERE announcement_id IS NOT NULL
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


DROP FUNCTION message_state(text, uuid);
