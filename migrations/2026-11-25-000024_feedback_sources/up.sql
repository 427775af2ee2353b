-- Provider feedback sources (docs/operations.md, "Provider bounce and complaint events"):
-- each binds one provider's event webhook (Amazon SES through SNS, Postmark, Mailgun,
-- SendGrid) to one account. Only the columns of the source's provider are set; what
-- authenticates a request is kept so no other tenant's valid provider credentials can
-- post into the account:
--   ses:      topic_arns, the SNS topics whose signed messages are accepted;
--   mailgun:  signing_key, the HTTP webhook signing key, sealed like every secret
--             (bound to (account_id, id));
--   sendgrid: public_key, the signed event webhook's verification key (base64 DER);
--   postmark: secret_hash, the SHA-256 of the random secret Mailroom generated for the
--             webhook URL's basic-auth password (shown once, like a token).
CREATE TABLE feedback_sources (
    account_id      uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    id              uuid        NOT NULL,
    provider        text        NOT NULL CHECK (provider IN ('ses', 'postmark', 'mailgun', 'sendgrid')),
    topic_arns      text[]      NOT NULL DEFAULT '{}',
    signing_key     bytea       NULL,
    public_key      text        NULL CHECK (length(public_key) BETWEEN 1 AND 1024),
    secret_hash     bytea       NULL CHECK (length(secret_hash) = 32),
    created_at      timestamptz NOT NULL,
    last_event_at   timestamptz NULL,
    events_recorded bigint      NOT NULL DEFAULT 0,
    events_ignored  bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, id),
    CHECK (provider <> 'ses' OR cardinality(topic_arns) BETWEEN 1 AND 10),
    CHECK (provider <> 'mailgun' OR signing_key IS NOT NULL),
    CHECK (provider <> 'sendgrid' OR public_key IS NOT NULL),
    CHECK (provider <> 'postmark' OR secret_hash IS NOT NULL)
);

-- Mailgun webhook tokens already seen, so a captured request cannot be replayed while
-- its timestamp is still fresh. Rows older than the accepted skew are pruned as new ones
-- are written, so the table stays as small as a few minutes of events.
CREATE TABLE feedback_source_tokens (
    account_id uuid        NOT NULL,
    source_id  uuid        NOT NULL,
    token      text        NOT NULL CHECK (length(token) BETWEEN 1 AND 256),
    seen_at    timestamptz NOT NULL,
    PRIMARY KEY (account_id, source_id, token),
    FOREIGN KEY (account_id, source_id) REFERENCES feedback_sources (account_id, id) ON DELETE CASCADE
);
CREATE INDEX feedback_source_tokens_seen_idx ON feedback_source_tokens (account_id, source_id, seen_at);
