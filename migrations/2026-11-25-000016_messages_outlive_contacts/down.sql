-- Messages of deleted contacts cannot be kept under the foreign key: they go, as before.
DELETE FROM messages m
 WHERE NOT EXISTS (SELECT 1 FROM contacts c WHERE c.account_id = m.account_id AND c.id = m.contact_id);
ALTER TABLE messages DROP CONSTRAINT messages_skip_reason_check;
ALTER TABLE messages ADD CONSTRAINT messages_skip_reason_check CHECK (skip_reason IN
    ('bounce_blocked', 'complaint_blocked', 'unsubscribed', 'free_limit_capped', 'no_mail_server',
     'automation_disabled'));
ALTER TABLE messages ADD CONSTRAINT messages_account_id_contact_id_fkey
    FOREIGN KEY (account_id, contact_id) REFERENCES contacts (account_id, id) ON DELETE CASCADE;
