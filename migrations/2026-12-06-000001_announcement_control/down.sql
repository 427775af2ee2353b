CREATE OR REPLACE FUNCTION message_state(status text, lease_token uuid) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE WHEN status = 'queued' AND lease_token IS NOT NULL
                      THEN 'sending' ELSE status END $$;
UPDATE messages SET status = 'queued' WHERE status = 'held';
UPDATE messages SET skip_reason = 'suppressed' WHERE skip_reason = 'cancelled';
ALTER TABLE messages DROP CONSTRAINT messages_skip_reason_check;
ALTER TABLE messages ADD CONSTRAINT messages_skip_reason_check CHECK (skip_reason IN
    ('bounce_blocked', 'complaint_blocked', 'unsubscribed', 'free_limit_capped', 'no_mail_server',
     'automation_disabled', 'contact_deleted', 'suppressed', 'pending_confirmation'));
DROP INDEX messages_announcement_held_idx;
ALTER TABLE messages DROP CONSTRAINT messages_held_check;
ALTER TABLE messages DROP CONSTRAINT messages_due_check;
ALTER TABLE messages ADD CONSTRAINT messages_due_check
    CHECK ((status = 'queued') = (next_attempt_at IS NOT NULL));
ALTER TABLE messages DROP CONSTRAINT messages_status_check;
ALTER TABLE messages ADD CONSTRAINT messages_status_check
    CHECK (status IN ('queued', 'sent', 'failed', 'bounced', 'skipped'));
DROP INDEX announcements_scheduled_idx;
UPDATE announcements SET status = 'running', process_date = NULL
    WHERE status IN ('scheduled', 'paused');
UPDATE announcements SET status = 'failed', failure_reason = 'cancelled'
    WHERE status = 'cancelled';
ALTER TABLE announcements DROP CONSTRAINT announcements_scheduled_check;
ALTER TABLE announcements DROP CONSTRAINT announcements_final_check;
ALTER TABLE announcements ADD CONSTRAINT announcements_final_check
    CHECK ((status = 'running') = (process_date IS NULL));
ALTER TABLE announcements DROP CONSTRAINT announcements_status_check;
ALTER TABLE announcements ADD CONSTRAINT announcements_status_check
    CHECK (status IN ('running', 'completed', 'failed'));
ALTER TABLE announcements DROP COLUMN send_at;
