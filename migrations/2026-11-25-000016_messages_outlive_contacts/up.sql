-- Messages are history and outlive their contact, as they outlive their template.
-- Before this, deleting a contact deleted its messages through the foreign key: a queued
-- message vanished without a final state, its Idempotency-Key was free again (a retry
-- queued it a second time), and a message in flight was sent but never recorded or
-- counted against the monthly send limit. Now `contact_id` keeps the deleted contact's
-- id, and the worker skips a message that falls due after the deletion with the reason
-- `contact_deleted` (docs/api-decisions.md, "Contacts and events").
ALTER TABLE messages DROP CONSTRAINT messages_account_id_contact_id_fkey;

ALTER TABLE messages DROP CONSTRAINT messages_skip_reason_check;
ALTER TABLE messages ADD CONSTRAINT messages_skip_reason_check CHECK (skip_reason IN
    ('bounce_blocked', 'complaint_blocked', 'unsubscribed', 'free_limit_capped', 'no_mail_server',
     'automation_disabled', 'contact_deleted'));
