-- Webhook events: the outbox of contact lifecycle notifications, one row per queued or
-- attempted delivery (docs/design.md#10-webhooks).
--
-- Rows are written in the transaction of the change they report; the delivery worker
-- claims due rows with FOR UPDATE SKIP LOCKED and a lease (`locked_until`,
-- `lease_token`), sends outside any transaction, and records the attempt only while it
-- still holds the lease. A worker that dies leaves a lease that expires, and the row is
-- claimed again.

CREATE TABLE webhook_events (
    account_id          uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    id                  uuid        NOT NULL,
    event_type          text        NOT NULL CHECK (event_type IN
        ('contact.bounced', 'contact.complained', 'contact.deleted', 'contact.unsubscribed')),
    status              text        NOT NULL CHECK (status IN ('queued', 'retrying', 'delivered', 'failed')),
    -- The body's `data`.
    payload             jsonb       NOT NULL,
    -- {url, authType, signingSecretSuffix, username, passwordOrTokenSuffix}: the target of
    -- the latest attempt, with only the last four characters of secrets.
    target              jsonb       NOT NULL,
    -- When the reported change happened (the body's `timestamp`; kept by manual retries).
    occurred_at         timestamptz NOT NULL,
    try_count           integer     NOT NULL DEFAULT 0 CHECK (try_count >= 0),
    next_attempt_at     timestamptz,
    locked_until        timestamptz,
    lease_token         uuid,
    last_attempt_at     timestamptz,
    last_status_code    integer     CHECK (last_status_code BETWEEN 100 AND 999),
    last_error          text,
    -- No foreign key: events are history, and a retention purge may remove a parent
    -- before its retries.
    parent_event_id     uuid,
    retried_by_user_id  uuid        REFERENCES users (id) ON DELETE SET NULL,
    created_at          timestamptz NOT NULL,
    delivered_at        timestamptz,
    PRIMARY KEY (account_id, id),
    -- Only pending events are due, and every pending event is due at some time.
    CONSTRAINT webhook_events_due_check
        CHECK ((status IN ('queued', 'retrying')) = (next_attempt_at IS NOT NULL)),
    CONSTRAINT webhook_events_delivered_check
        CHECK ((status = 'delivered') = (delivered_at IS NOT NULL)),
    CONSTRAINT webhook_events_lease_check
        CHECK ((locked_until IS NULL) = (lease_token IS NULL))
);

-- The claim: pending rows by due time. Partial, so delivered and failed history costs the
-- queue nothing. It spans accounts on purpose: the worker serves every account.
CREATE INDEX webhook_events_due_idx
    ON webhook_events (next_attempt_at)
    WHERE status IN ('queued', 'retrying');
-- The list, oldest first, with and without the status filter.
CREATE INDEX webhook_events_list_idx ON webhook_events (account_id, created_at, id);
CREATE INDEX webhook_events_status_idx ON webhook_events (account_id, status, created_at, id);
