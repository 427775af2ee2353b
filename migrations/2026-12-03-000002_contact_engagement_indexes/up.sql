-- Engagement counts on any message (docs/api-decisions.md, "Engagement conditions") read
-- a range of one of these instead of walking the account's contacts: at 1M contacts a
-- count of "opened in the last 30 days" took 230 ms as a walk and 16-26 ms from the
-- index. Partial, so a contact that never opened, clicked or bounced has no entry. Opens,
-- clicks and bounces move these columns once per message, and each such update of the
-- contact is then not heap-only; `last_sent_at`, moved by every delivered message beside
-- `message_count`, has no index so that delivery's update stays heap-only
-- (`2026-11-29-000037_contacts_room_for_counts`). Expand only.
CREATE INDEX contacts_last_opened_idx ON contacts (account_id, last_opened_at)
    WHERE last_opened_at IS NOT NULL;
CREATE INDEX contacts_last_clicked_idx ON contacts (account_id, last_clicked_at)
    WHERE last_clicked_at IS NOT NULL;
CREATE INDEX contacts_last_bounced_idx ON contacts (account_id, last_bounced_at)
    WHERE last_bounced_at IS NOT NULL;
