ALTER TABLE messages DROP CONSTRAINT messages_skip_reason_check;
ALTER TABLE messages ADD CONSTRAINT messages_skip_reason_check CHECK (skip_reason IN
    ('bounce_blocked', 'complaint_blocked', 'unsubscribed', 'free_limit_capped', 'no_mail_server',
     'automation_disabled', 'contact_deleted'));
DROP TABLE suppression_keys;
DROP TABLE suppressions;
