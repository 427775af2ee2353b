-- The contact list's "email contains" filter (`email_lower LIKE '%…%'`) is served by a
-- trigram index instead of a scan of the account's contacts. pg_trgm is a contrib
-- extension, trusted since PostgreSQL 13, so the database owner may create it.
--
-- The index holds email_lower alone: the account is left to the heap recheck, which at
-- the measured sizes costs less than a btree_gin (account_id, email_lower) index would
-- add to every insert (see docs/operations.md).
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE INDEX contacts_email_trgm_idx ON contacts USING gin (email_lower gin_trgm_ops);
