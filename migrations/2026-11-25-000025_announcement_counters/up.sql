-- Console API additions: per-announcement counters, the message log's
-- announcement filter, and test sends.
--
-- Counters. An announcement's read shows how many of its messages are in each state and
-- how many were opened and clicked. Counting its rows on every read costs a scan of up to
-- the whole audience (a million rows at 1M contacts, plus a join with message_tracking);
-- instead statement-level triggers keep `announcement_counters` up to date in the same
-- transaction as the change, so the read sums a few small rows.
--
-- Each writer adds its deltas to the row of its own slot, its backend's pid: two
-- transactions running at once are never in the same backend, so they never write the
-- same counter row. The delivery workers settling one announcement's messages at once
-- neither queue on one hot row nor can deadlock on these rows; the read sums the slots,
-- one per backend that ever wrote to the announcement (a few dozen: pool connections live
-- long).
-- Only a status change counts (a retry that stays `queued` writes nothing), and a
-- statement that touches no announcement's message writes nothing.

CREATE TABLE announcement_counters (
    account_id       uuid     NOT NULL,
    announcement_id  uuid     NOT NULL,
    slot             integer  NOT NULL,
    queued           bigint   NOT NULL DEFAULT 0,
    sending          bigint   NOT NULL DEFAULT 0,
    sent             bigint   NOT NULL DEFAULT 0,
    failed           bigint   NOT NULL DEFAULT 0,
    bounced          bigint   NOT NULL DEFAULT 0,
    skipped          bigint   NOT NULL DEFAULT 0,
    opened           bigint   NOT NULL DEFAULT 0,
    clicked          bigint   NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, announcement_id, slot),
    FOREIGN KEY (account_id, announcement_id) REFERENCES announcements (account_id, id)
        ON DELETE CASCADE
);

-- Each trigger adds its statement's deltas with one grouped upsert read straight from the
-- transition tables, in (account_id, announcement_id) order. PL/pgSQL keeps the plans of
-- these statements for the session; an earlier version went through jsonb and a SQL
-- function, which was planned afresh on every statement (docs/operations.md, "Announcement
-- counters", has the figures).

CREATE FUNCTION announcement_counters_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- Most UPDATEs on `messages` are the delivery engine's claims, lease renewals and settles,
-- many of them of transactional messages: a statement with no announcement's message
-- returns after a scan that stops at the first announcement row. Otherwise no join of the
-- old rows to the new is needed: every updated row is once in each, so an (announcement,
-- status)'s net change is its rows in `new_rows` less its rows in `old_rows` (a row whose
-- status stayed adds 1 and takes 1). Statements that change no count, such as lease
-- renewals, write nothing.
CREATE FUNCTION announcement_counters_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- The announcement itself may be going (its counters go with it by cascade): only
-- announcements that still exist are written to.
CREATE FUNCTION announcement_counters_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE TRIGGER messages_inserted_count_announcements
    AFTER INSERT ON messages REFERENCING NEW TABLE AS inserted_rows
    FOR EACH STATEMENT EXECUTE FUNCTION announcement_counters_on_insert();
CREATE TRIGGER messages_updated_count_announcements
    AFTER UPDATE ON messages REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION announcement_counters_on_update();
CREATE TRIGGER messages_deleted_count_announcements
    AFTER DELETE ON messages REFERENCING OLD TABLE AS deleted_rows
    FOR EACH STATEMENT EXECUTE FUNCTION announcement_counters_on_delete();

-- First opens and clicks: message_tracking sets opened_at / clicked_at once per message
-- (INSERT … ON CONFLICT … DO UPDATE … WHERE … IS NULL), so a row that gains one counts.
CREATE FUNCTION announcement_engagement_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO announcement_counters AS c
        (account_id, announcement_id, slot, opened, clicked)
    SELECT m.account_id, m.announcement_id, pg_backend_pid(),
           count(t.opened_at), count(t.clicked_at)
    FROM inserted_rows t
    JOIN messages m ON m.account_id = t.account_id AND m.id = t.message_id
    WHERE m.announcement_id IS NOT NULL
      AND (t.opened_at IS NOT NULL OR t.clicked_at IS NOT NULL)
    GROUP BY m.account_id, m.announcement_id
    ORDER BY m.account_id, m.announcement_id
    ON CONFLICT (account_id, announcement_id, slot) DO UPDATE SET
        opened = c.opened + EXCLUDED.opened,
        clicked = c.clicked + EXCLUDED.clicked;
    RETURN NULL;
END
$$;

CREATE FUNCTION announcement_engagement_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO announcement_counters AS c
        (account_id, announcement_id, slot, opened, clicked)
    SELECT m.account_id, m.announcement_id, pg_backend_pid(),
           count(*) FILTER (WHERE o.opened_at IS NULL AND t.opened_at IS NOT NULL),
           count(*) FILTER (WHERE o.clicked_at IS NULL AND t.clicked_at IS NOT NULL)
    FROM new_rows t
    JOIN old_rows o ON o.account_id = t.account_id AND o.message_id = t.message_id
    JOIN messages m ON m.account_id = t.account_id AND m.id = t.message_id
    WHERE m.announcement_id IS NOT NULL
      AND ((o.opened_at IS NULL AND t.opened_at IS NOT NULL)
           OR (o.clicked_at IS NULL AND t.clicked_at IS NOT NULL))
    GROUP BY m.account_id, m.announcement_id
    ORDER BY m.account_id, m.announcement_id
    ON CONFLICT (account_id, announcement_id, slot) DO UPDATE SET
        opened = c.opened + EXCLUDED.opened,
        clicked = c.clicked + EXCLUDED.clicked;
    RETURN NULL;
END
$$;

CREATE TRIGGER message_tracking_inserted_count_announcements
    AFTER INSERT ON message_tracking REFERENCING NEW TABLE AS inserted_rows
    FOR EACH STATEMENT EXECUTE FUNCTION announcement_engagement_on_insert();
CREATE TRIGGER message_tracking_updated_count_announcements
    AFTER UPDATE ON message_tracking REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION announcement_engagement_on_update();

-- The counts of announcements that exist already.
INSERT INTO announcement_counters
    (account_id, announcement_id, slot, queued, sending, sent, failed, bounced, skipped,
     opened, clicked)
SELECT m.account_id, m.announcement_id, 0,
       count(*) FILTER (WHERE m.status = 'queued'),
       count(*) FILTER (WHERE m.status = 'sending'),
       count(*) FILTER (WHERE m.status = 'sent'),
       count(*) FILTER (WHERE m.status = 'failed'),
       count(*) FILTER (WHERE m.status = 'bounced'),
       count(*) FILTER (WHERE m.status = 'skipped'),
       count(t.opened_at),
       count(t.clicked_at)
FROM messages m
LEFT JOIN message_tracking t ON t.account_id = m.account_id AND t.message_id = m.id
WHERE m.announcement_id IS NOT NULL
GROUP BY m.account_id, m.announcement_id;

-- The message log filtered by announcement (`GET …/messages?announcementId=`), in the
-- log's order, without reading the account's other messages.
CREATE INDEX messages_announcement_list_idx ON messages (account_id, announcement_id, created_at, id)
    WHERE announcement_id IS NOT NULL;

-- Test sends of a template (`POST …/templates/{templateId}/test-send`) are ordinary
-- transactional messages marked as tests in the log.
ALTER TABLE messages ADD COLUMN test boolean NOT NULL DEFAULT false;
