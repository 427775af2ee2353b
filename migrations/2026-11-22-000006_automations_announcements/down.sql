DROP INDEX messages_announcement_pending_idx;
ALTER TABLE messages DROP CONSTRAINT messages_skip_reason_check;
ALTER TABLE messages ADD CONSTRAINT messages_skip_reason_check CHECK (skip_reason IN
    ('bounce_blocked', 'complaint_blocked', 'unsubscribed', 'free_limit_capped', 'no_mail_server'));
ALTER TABLE messages
    DROP CONSTRAINT messages_account_id_announcement_id_contact_id_key,
    DROP CONSTRAINT messages_origin_check,
    DROP COLUMN announcement_id,
    DROP COLUMN automation_id;
DROP TABLE announcements;
DROP TABLE automation_firings;
