-- The suppression list: the addresses an account must not mail, kept apart from the
-- contacts so that deleting or erasing a contact does not forget that its address
-- bounced, complained or unsubscribed. An entry is found by a keyed hash of the
-- normalised address (HMAC-SHA256 under the account's own key, `suppression_keys`), so
-- an erased person's address need not be kept in clear: `email` holds it only until the
-- person is erased. One entry per address and reason.
CREATE TABLE suppressions (
    account_id   uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    address_hash bytea       NOT NULL CHECK (octet_length(address_hash) = 32),
    reason       text        NOT NULL
                 CHECK (reason IN ('hard_bounce', 'complaint', 'unsubscribe', 'manual')),
    source       text        NOT NULL
                 CHECK (source IN ('smtp_reply', 'feedback_report', 'unsubscribe_link',
                                   'contact_deleted', 'api', 'import', 'console')),
    email        text        CHECK (length(email) <= 320),
    detail       text        CHECK (length(detail) <= 1000),
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (account_id, address_hash, reason)
);

-- The list's pages, newest first, with or without a reason.
CREATE INDEX suppressions_newest_idx ON suppressions (account_id, created_at DESC, address_hash, reason);
CREATE INDEX suppressions_reason_newest_idx
    ON suppressions (account_id, reason, created_at DESC, address_hash);

-- Each account's key for the address hashes: 32 random bytes, sealed under
-- MAILROOM_SECRET_KEY like every stored secret (so `mailroom rotate-secrets` re-seals it
-- and the key itself never changes). Made on the account's first suppression.
CREATE TABLE suppression_keys (
    account_id uuid        PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    sealed_key bytea       NOT NULL,
    created_at timestamptz NOT NULL
);

-- A message whose address is on the list by hand is skipped as `suppressed`.
ALTER TABLE messages DROP CONSTRAINT messages_skip_reason_check;
ALTER TABLE messages ADD CONSTRAINT messages_skip_reason_check CHECK (skip_reason IN
    ('bounce_blocked', 'complaint_blocked', 'unsubscribed', 'free_limit_capped', 'no_mail_server',
     'automation_disabled', 'contact_deleted', 'suppressed'));
