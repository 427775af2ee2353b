DROP INDEX messages_account_id_announcement_id_contact_id_key;
ALTER TABLE messages ADD CONSTRAINT messages_account_id_announcement_id_contact_id_key
    UNIQUE (account_id, announcement_id, contact_id);

DROP INDEX messages_account_id_idempotency_key_key;
ALTER TABLE messages ADD CONSTRAINT messages_account_id_idempotency_key_key
    UNIQUE (account_id, idempotency_key);

DROP INDEX messages_account_leased_idx;
CREATE INDEX messages_lease_token ON messages (lease_token) WHERE lease_token IS NOT NULL;

CREATE INDEX messages_due_idx ON messages (next_attempt_at) WHERE status IN ('queued', 'sending');
