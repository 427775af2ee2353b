-- Messages: the outbox of emails, one row per email (docs/design.md#8-delivery), and the daily
-- counters of `GET …/messages/stats`.
--
-- A message is written in the transaction of whatever caused it. Workers claim due
-- `queued` rows with FOR UPDATE SKIP LOCKED and a lease (`locked_until`, `lease_token`,
-- the convention of crates/postgres/src/queue.rs), move them to `sending`, talk SMTP with
-- no transaction open, and write the outcome in a short transaction of its own, only while
-- they still hold the lease. A worker that dies leaves a `sending` row whose lease runs
-- out; the claim takes such rows back.

CREATE TABLE messages (
    account_id         uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    id                 uuid        NOT NULL,
    contact_id         uuid        NOT NULL,
    -- The address when queued: the log stays readable after the contact changes.
    email              text        NOT NULL,
    -- No foreign key: a message is history and outlives its template; a worker that
    -- finds the template gone fails the message.
    template_id        uuid        NOT NULL,
    kind               text        NOT NULL CHECK (kind IN ('transactional', 'automation', 'announcement')),
    status             text        NOT NULL CHECK (status IN ('queued', 'sending', 'sent', 'failed', 'bounced', 'skipped')),
    skip_reason        text        CHECK (skip_reason IN
        ('bounce_blocked', 'complaint_blocked', 'unsubscribed', 'free_limit_capped', 'no_mail_server')),
    data               jsonb       NOT NULL DEFAULT '{}'::jsonb,
    attempts           integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at    timestamptz,
    locked_until       timestamptz,
    lease_token        uuid,
    last_reply         text,
    -- The `Message-ID` header, fixed at queue time so retries carry the same one.
    message_id_header  text        NOT NULL,
    idempotency_key    text,
    request_hash       text,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    sent_at            timestamptz,
    PRIMARY KEY (account_id, id),
    FOREIGN KEY (account_id, contact_id) REFERENCES contacts (account_id, id) ON DELETE CASCADE,
    CONSTRAINT messages_account_id_idempotency_key_key UNIQUE (account_id, idempotency_key),
    CONSTRAINT messages_skip_check CHECK ((status = 'skipped') = (skip_reason IS NOT NULL)),
    CONSTRAINT messages_idempotency_check CHECK ((idempotency_key IS NULL) = (request_hash IS NULL)),
    CONSTRAINT messages_lease_check CHECK ((locked_until IS NULL) = (lease_token IS NULL)),
    -- Only waiting rows are due; a `sending` row keeps its due time for lease recovery.
    CONSTRAINT messages_due_check
        CHECK ((status IN ('queued', 'sending')) = (next_attempt_at IS NOT NULL))
);

-- The claim: waiting and in-flight rows by due time (in-flight rows come back when their
-- lease runs out). Partial, so the history costs the queue nothing.
CREATE INDEX messages_due_idx ON messages (next_attempt_at) WHERE status IN ('queued', 'sending');
-- The log, oldest first, with and without filters.
CREATE INDEX messages_list_idx ON messages (account_id, created_at, id);
CREATE INDEX messages_status_idx ON messages (account_id, status, created_at, id);
CREATE INDEX messages_contact_idx ON messages (account_id, contact_id, created_at, id);

CREATE TABLE message_stats_daily (
    account_id         uuid    NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    day                date    NOT NULL,
    bounce_blocked     bigint  NOT NULL DEFAULT 0,
    complained         bigint  NOT NULL DEFAULT 0,
    complaint_blocked  bigint  NOT NULL DEFAULT 0,
    free_limit_capped  bigint  NOT NULL DEFAULT 0,
    bounced            bigint  NOT NULL DEFAULT 0,
    clicked            bigint  NOT NULL DEFAULT 0,
    failed             bigint  NOT NULL DEFAULT 0,
    opened             bigint  NOT NULL DEFAULT 0,
    sent               bigint  NOT NULL DEFAULT 0,
    unsubscribed       bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, day)
);
