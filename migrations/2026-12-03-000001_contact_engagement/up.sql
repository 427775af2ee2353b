-- Engagement conditions on any message (docs/api-decisions.md, "Engagement conditions"):
-- per contact, the latest time one of its messages was sent, first opened, first clicked
-- or bounced, so a count on "opened in the last 30 days" reads the contact's row instead
-- of joining the account's messages. Delivery, tracking and bounce reports keep them in
-- the statements that already write the contact or the message. Expand only: nullable
-- columns without a default (no table rewrite) and no index, so the per-message
-- `message_count` update stays heap-only (`2026-11-29-000037_contacts_room_for_counts`).
ALTER TABLE contacts
    ADD COLUMN last_sent_at    timestamptz,
    ADD COLUMN last_opened_at  timestamptz,
    ADD COLUMN last_clicked_at timestamptz,
    ADD COLUMN last_bounced_at timestamptz;

-- What the messages already show. A bounce's time is the message's last update, which
-- the bounce wrote. Test sends are not the contact's messages.
UPDATE contacts AS c
SET last_sent_at = e.sent_at,
    last_opened_at = e.opened_at,
    last_clicked_at = e.clicked_at,
    last_bounced_at = e.bounced_at
FROM (
    SELECT m.account_id, m.contact_id,
           max(m.sent_at) AS sent_at,
           max(t.opened_at) AS opened_at,
           max(t.clicked_at) AS clicked_at,
           max(m.updated_at) FILTER (WHERE m.status = 'bounced') AS bounced_at
    FROM messages m
    LEFT JOIN message_tracking t ON t.account_id = m.account_id AND t.message_id = m.id
    WHERE NOT m.test
    GROUP BY m.account_id, m.contact_id
) AS e
WHERE c.account_id = e.account_id AND c.id = e.contact_id;
