-- check.sql: run with one variant enabled (variant.sh old|v2); prints two lines, both "exact".
-- Exactness of the counting triggers: rebuild the counters, change messages and tracking
-- in several ways, and compare the summed slots with a recount.
\set ON_ERROR_STOP 1
BEGIN;
DELETE FROM announcement_counters;
INSERT INTO announcement_counters (account_id, announcement_id, slot, queued, sending, sent, failed, bounced, skipped, opened, clicked)
SELECT m.account_id, m.announcement_id, 0,
       count(*) FILTER (WHERE m.status = 'queued'), count(*) FILTER (WHERE m.status = 'sending'),
       count(*) FILTER (WHERE m.status = 'sent'), count(*) FILTER (WHERE m.status = 'failed'),
       count(*) FILTER (WHERE m.status = 'bounced'), count(*) FILTER (WHERE m.status = 'skipped'),
       count(t.opened_at), count(t.clicked_at)
FROM messages m LEFT JOIN message_tracking t ON t.account_id = m.account_id AND t.message_id = m.id
WHERE m.announcement_id IS NOT NULL GROUP BY 1, 2;
-- status changes across both accounts in one statement, some rows unchanged
UPDATE messages SET status = 'sending', locked_until = now(), lease_token = gen_random_uuid()
WHERE id IN (SELECT id FROM messages WHERE status = 'queued' ORDER BY id LIMIT 700);
UPDATE messages SET status = (ARRAY['sent','failed','bounced'])[1 + (abs(hashtext(id::text)) % 3)],
       next_attempt_at = NULL, locked_until = NULL, lease_token = NULL
WHERE status = 'sending' AND id IN (SELECT id FROM messages WHERE status = 'sending' ORDER BY id LIMIT 500);
UPDATE messages SET updated_at = now() WHERE id IN (SELECT id FROM messages ORDER BY id LIMIT 300);
UPDATE messages SET status = 'skipped', skip_reason = 'unsubscribed', next_attempt_at = NULL, locked_until = NULL, lease_token = NULL
WHERE id IN (SELECT id FROM messages WHERE status = 'sending' ORDER BY id LIMIT 50);
-- first opens / clicks: insert, then update gaining a click, then a repeat that gains nothing
INSERT INTO message_tracking (account_id, message_id, opened_at)
SELECT account_id, id, now() FROM messages WHERE status = 'sent' ORDER BY id LIMIT 200
ON CONFLICT DO NOTHING;
INSERT INTO message_tracking (account_id, message_id, clicked_at)
SELECT account_id, id, now() FROM messages WHERE status IN ('sent', 'failed') ORDER BY id LIMIT 300
ON CONFLICT (account_id, message_id) DO UPDATE SET clicked_at = EXCLUDED.clicked_at
WHERE message_tracking.clicked_at IS NULL;
INSERT INTO message_tracking (account_id, message_id, clicked_at)
SELECT account_id, id, now() FROM messages WHERE status IN ('sent', 'failed') ORDER BY id LIMIT 300
ON CONFLICT (account_id, message_id) DO UPDATE SET clicked_at = EXCLUDED.clicked_at
WHERE message_tracking.clicked_at IS NULL;
SELECT CASE WHEN count(*) = 0 THEN 'all counters exact before deletes' ELSE 'MISMATCH all counters exact before deletes' END FROM (
  SELECT announcement_id, sum(queued), sum(sending), sum(sent), sum(failed), sum(bounced), sum(skipped), sum(opened), sum(clicked)
  FROM announcement_counters GROUP BY 1
  EXCEPT
  SELECT m.announcement_id, count(*) FILTER (WHERE m.status = 'queued'), count(*) FILTER (WHERE m.status = 'sending'),
         count(*) FILTER (WHERE m.status = 'sent'), count(*) FILTER (WHERE m.status = 'failed'),
         count(*) FILTER (WHERE m.status = 'bounced'), count(*) FILTER (WHERE m.status = 'skipped'), count(t.opened_at), count(t.clicked_at)
  FROM messages m LEFT JOIN message_tracking t ON t.account_id = m.account_id AND t.message_id = m.id
  WHERE m.announcement_id IS NOT NULL GROUP BY 1) AS differing;
-- A deleted message's opens and clicks stay counted (the engagement counters are not
-- decremented by deletes, in the first version as in this one): statuses only from here.
DELETE FROM messages WHERE id IN (SELECT id FROM messages ORDER BY id DESC LIMIT 400);
DELETE FROM messages WHERE id IN (SELECT id FROM messages WHERE status <> 'queued' ORDER BY id LIMIT 40);
SELECT CASE WHEN count(*) = 0 THEN 'status counters exact after deletes' ELSE 'MISMATCH status counters exact after deletes' END FROM (
  SELECT announcement_id, sum(queued), sum(sending), sum(sent), sum(failed), sum(bounced), sum(skipped)
  FROM announcement_counters GROUP BY 1
  EXCEPT
  SELECT m.announcement_id, count(*) FILTER (WHERE m.status = 'queued'), count(*) FILTER (WHERE m.status = 'sending'),
         count(*) FILTER (WHERE m.status = 'sent'), count(*) FILTER (WHERE m.status = 'failed'),
         count(*) FILTER (WHERE m.status = 'bounced'), count(*) FILTER (WHERE m.status = 'skipped')
  FROM messages m LEFT JOIN message_tracking t ON t.account_id = m.account_id AND t.message_id = m.id
  WHERE m.announcement_id IS NOT NULL GROUP BY 1) AS differing;
ROLLBACK;
