-- Console API additions (issue 17): per-announcement counters, the message log's
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

-- Adds per-(announcement, status) deltas, given as rows of `announcement_status_deltas`.
CREATE FUNCTION announcement_counters_add(deltas jsonb) RETURNS void LANGUAGE sql AS $$
    INSERT INTO announcement_counters AS c
        (account_id, announcement_id, slot, queued, sending, sent, failed, bounced, skipped,
         opened, clicked)
    SELECT d.account_id, d.announcement_id, pg_backend_pid(),
           coalesce(sum(d.n) FILTER (WHERE d.status = 'queued'), 0),
           coalesce(sum(d.n) FILTER (WHERE d.status = 'sending'), 0),
           coalesce(sum(d.n) FILTER (WHERE d.status = 'sent'), 0),
           coalesce(sum(d.n) FILTER (WHERE d.status = 'failed'), 0),
           coalesce(sum(d.n) FILTER (WHERE d.status = 'bounced'), 0),
           coalesce(sum(d.n) FILTER (WHERE d.status = 'skipped'), 0),
           coalesce(sum(d.n) FILTER (WHERE d.status = 'opened'), 0),
           coalesce(sum(d.n) FILTER (WHERE d.status = 'clicked'), 0)
    FROM jsonb_to_recordset(deltas) AS d(account_id uuid, announcement_id uuid, status text, n bigint)
    GROUP BY d.account_id, d.announcement_id
    ORDER BY d.account_id, d.announcement_id
    ON CONFLICT (account_id, announcement_id, slot) DO UPDATE SET
        queued = c.queued + EXCLUDED.queued,
        sending = c.sending + EXCLUDED.sending,
        sent = c.sent + EXCLUDED.sent,
        failed = c.failed + EXCLUDED.failed,
        bounced = c.bounced + EXCLUDED.bounced,
        skipped = c.skipped + EXCLUDED.skipped,
        opened = c.opened + EXCLUDED.opened,
        clicked = c.clicked + EXCLUDED.clicked;
$$;

CREATE FUNCTION announcement_counters_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    deltas jsonb;
BEGIN
    SELECT jsonb_agg(jsonb_build_object('account_id', account_id,
               'announcement_id', announcement_id, 'status', status, 'n', n))
    INTO deltas
    FROM (SELECT account_id, announcement_id, status, count(*) AS n FROM inserted_rows
          WHERE announcement_id IS NOT NULL GROUP BY 1, 2, 3) AS grouped;
    IF deltas IS NOT NULL THEN
        PERFORM announcement_counters_add(deltas);
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION announcement_counters_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    deltas jsonb;
BEGIN
    SELECT jsonb_agg(jsonb_build_object('account_id', account_id,
               'announcement_id', announcement_id, 'status', status, 'n', n))
    INTO deltas
    FROM (SELECT account_id, announcement_id, status, sum(n) AS n FROM (
              SELECT n.account_id, n.announcement_id, n.status, 1 AS n
              FROM new_rows n JOIN old_rows o ON o.account_id = n.account_id AND o.id = n.id
              WHERE n.announcement_id IS NOT NULL AND n.status <> o.status
              UNION ALL
              SELECT o.account_id, o.announcement_id, o.status, -1
              FROM new_rows n JOIN old_rows o ON o.account_id = n.account_id AND o.id = n.id
              WHERE o.announcement_id IS NOT NULL AND n.status <> o.status
          ) AS changes GROUP BY 1, 2, 3) AS grouped;
    IF deltas IS NOT NULL THEN
        PERFORM announcement_counters_add(deltas);
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION announcement_counters_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    deltas jsonb;
BEGIN
    SELECT jsonb_agg(jsonb_build_object('account_id', account_id,
               'announcement_id', announcement_id, 'status', status, 'n', -n))
    INTO deltas
    FROM (SELECT account_id, announcement_id, status, count(*) AS n FROM deleted_rows
          WHERE announcement_id IS NOT NULL GROUP BY 1, 2, 3) AS grouped;
    -- The announcement itself may be going (its counters go with it by cascade).
    IF deltas IS NOT NULL THEN
        PERFORM announcement_counters_add(
            (SELECT jsonb_agg(e) FROM jsonb_array_elements(deltas) AS e
             WHERE EXISTS (SELECT 1 FROM announcements a
                           WHERE a.account_id = (e ->> 'account_id')::uuid
                             AND a.id = (e ->> 'announcement_id')::uuid)));
    END IF;
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
DECLARE
    deltas jsonb;
BEGIN
    SELECT jsonb_agg(jsonb_build_object('account_id', account_id,
               'announcement_id', announcement_id, 'status', status, 'n', n))
    INTO deltas
    FROM (SELECT m.account_id, m.announcement_id, e.status, count(*) AS n
          FROM inserted_rows t
          JOIN messages m ON m.account_id = t.account_id AND m.id = t.message_id
          CROSS JOIN LATERAL (VALUES ('opened', t.opened_at), ('clicked', t.clicked_at))
              AS e(status, at)
          WHERE m.announcement_id IS NOT NULL AND e.at IS NOT NULL
          GROUP BY 1, 2, 3) AS grouped;
    IF deltas IS NOT NULL THEN
        PERFORM announcement_counters_add(deltas);
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION announcement_engagement_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    deltas jsonb;
BEGIN
    SELECT jsonb_agg(jsonb_build_object('account_id', account_id,
               'announcement_id', announcement_id, 'status', status, 'n', n))
    INTO deltas
    FROM (SELECT m.account_id, m.announcement_id, e.status, count(*) AS n
          FROM new_rows t
          JOIN old_rows o ON o.account_id = t.account_id AND o.message_id = t.message_id
          JOIN messages m ON m.account_id = t.account_id AND m.id = t.message_id
          CROSS JOIN LATERAL (VALUES ('opened', o.opened_at, t.opened_at),
                                     ('clicked', o.clicked_at, t.clicked_at))
              AS e(status, before, after)
          WHERE m.announcement_id IS NOT NULL AND e.before IS NULL AND e.after IS NOT NULL
          GROUP BY 1, 2, 3) AS grouped;
    IF deltas IS NOT NULL THEN
        PERFORM announcement_counters_add(deltas);
    END IF;
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
