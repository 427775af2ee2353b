ALTER TABLE messages DROP CONSTRAINT messages_skip_reason_check;
ALTER TABLE messages ADD CONSTRAINT messages_skip_reason_check CHECK (skip_reason IN
    ('bounce_blocked', 'complaint_blocked', 'unsubscribed', 'free_limit_capped', 'no_mail_server',
     'automation_disabled', 'contact_deleted', 'suppressed'));
ALTER TABLE messages DROP COLUMN form_id;
ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_event_type_check;
ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_event_type_check CHECK (event_type IN
    ('contact.bounced', 'contact.complained', 'contact.deleted', 'contact.unsubscribed'));
ALTER TABLE contacts DROP COLUMN confirmed_at;
ALTER TABLE contacts DROP COLUMN pending_since;
DROP TABLE form_confirmations;
DROP TABLE forms;
