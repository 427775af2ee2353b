-- Announcements under control (docs/api-decisions.md, "Scheduling, pausing and
-- cancelling announcements"): an announcement may wait for its `send_at` (`scheduled`),
-- be paused and resumed, or be cancelled. Expand only: new values and a nullable column.
-- On Citus this runs in one transaction with DDL on distributed tables: Citus sends a
-- function's change over its metadata connections and refuses that after a parallel
-- command on a distributed table, so the transaction's commands go one shard at a time
-- and the function comes first. (On plain PostgreSQL the setting is a placeholder.)
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';

-- A held message (below) is `queued` to the API, the counters and the metrics.
CREATE OR REPLACE FUNCTION message_state(status text, lease_token uuid) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE WHEN status = 'queued' AND lease_token IS NOT NULL THEN 'sending'
                      WHEN status = 'held' THEN 'queued'
                      ELSE status END $$;

ALTER TABLE announcements ADD COLUMN send_at timestamptz;
ALTER TABLE announcements DROP CONSTRAINT announcements_status_check;
ALTER TABLE announcements ADD CONSTRAINT announcements_status_check
    CHECK (status IN ('scheduled', 'running', 'paused', 'completed', 'cancelled', 'failed'));
ALTER TABLE announcements DROP CONSTRAINT announcements_final_check;
ALTER TABLE announcements ADD CONSTRAINT announcements_final_check
    CHECK ((status IN ('scheduled', 'running', 'paused')) = (process_date IS NULL));
ALTER TABLE announcements ADD CONSTRAINT announcements_scheduled_check
    CHECK (status <> 'scheduled' OR send_at IS NOT NULL);
-- The expansion looks for scheduled announcements that fell due beside running ones.
CREATE INDEX announcements_scheduled_idx ON announcements (send_at) WHERE status = 'scheduled';

-- A paused announcement's waiting messages are stored as `held`: out of the due index
-- (which names only `queued`), so no claim reads them, with their due time kept for the
-- resume. The API, the counters and the metrics call a held message `queued`.
ALTER TABLE messages DROP CONSTRAINT messages_status_check;
ALTER TABLE messages ADD CONSTRAINT messages_status_check
    CHECK (status IN ('queued', 'held', 'sent', 'failed', 'bounced', 'skipped'));
ALTER TABLE messages DROP CONSTRAINT messages_due_check;
ALTER TABLE messages ADD CONSTRAINT messages_due_check
    CHECK ((status IN ('queued', 'held')) = (next_attempt_at IS NOT NULL));
ALTER TABLE messages ADD CONSTRAINT messages_held_check
    CHECK (status <> 'held' OR (announcement_id IS NOT NULL AND lease_token IS NULL));
-- Pause, resume and cancel find an announcement's held messages by this index.
CREATE INDEX messages_announcement_held_idx ON messages (account_id, announcement_id)
    WHERE status = 'held';

ALTER TABLE messages DROP CONSTRAINT messages_skip_reason_check;
ALTER TABLE messages ADD CONSTRAINT messages_skip_reason_check CHECK (skip_reason IN
    ('bounce_blocked', 'complaint_blocked', 'unsubscribed', 'free_limit_capped', 'no_mail_server',
     'automation_disabled', 'contact_deleted', 'suppressed', 'pending_confirmation', 'cancelled'));
