-- Fewer index entries per message state change (docs/operations.md, "Delivery engine",
-- "Index audit of messages"). No write to a message row is HOT (`status` is indexed), so
-- every claim and every record adds an entry to each index whose predicate the new row
-- version matches. Each index below was checked against the queries that read it
-- (EXPLAIN on a filled table); no API list or filter loses its index.

-- The global due index is superseded by the per-account `messages_account_due_idx` (same
-- predicate) since the claim runs per lane (migration 14); the queue-depth gauges scan
-- that one instead.
DROP INDEX messages_due_idx;

-- The lease renewal finds its rows by primary key (`account_id = $1 AND id = ANY($held)`);
-- the lane reschedule asks for one account's leases, so the leased rows are indexed per
-- account. `locked_until` stays out of every index, so a renewal may still be HOT.
DROP INDEX messages_lease_token;
CREATE INDEX messages_account_leased_idx ON messages (account_id) WHERE lease_token IS NOT NULL;

-- The two unique keys hold only the rows that have a value: a transactional message
-- without an idempotency key, or any message outside an announcement, had an entry of
-- NULLs in them that no lookup can find and no uniqueness needs. Same names, so the
-- violations the application maps keep their constraint name.
ALTER TABLE messages DROP CONSTRAINT messages_account_id_idempotency_key_key;
CREATE UNIQUE INDEX messages_account_id_idempotency_key_key
    ON messages (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

ALTER TABLE messages DROP CONSTRAINT messages_account_id_announcement_id_contact_id_key;
CREATE UNIQUE INDEX messages_account_id_announcement_id_contact_id_key
    ON messages (account_id, announcement_id, contact_id) WHERE announcement_id IS NOT NULL;
