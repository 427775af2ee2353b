-- The contact list sorted or filtered by status without a scan of the account's contacts
-- (docs/console.md, "Page times").
--
-- The expression is the adapter's STATUS_RANK (crates/postgres/src/repositories/contacts.rs)
-- character for character: PostgreSQL uses an expression index only for the same
-- expression. Bounced contacts get a partial index like the unsubscribed ones
-- (migration 20): the "bounced" filter then reads the few bounced contacts, not all.
-- IF NOT EXISTS lets an operator build them CONCURRENTLY beforehand on a large
-- installation.
CREATE INDEX IF NOT EXISTS contacts_status_rank_idx
    ON contacts (account_id, (CASE WHEN hard_bounced_at IS NOT NULL THEN 3
        WHEN complaint_at IS NOT NULL THEN 2 WHEN unsubscribed_at IS NOT NULL THEN 1
        ELSE 0 END), id);

CREATE INDEX IF NOT EXISTS contacts_bounced_idx
    ON contacts (account_id, id) WHERE hard_bounced_at IS NOT NULL;
