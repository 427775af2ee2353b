-- Foundation: users, tokens, accounts, memberships, webhook configuration, and the
-- templates, automations and topics that account creation seeds.
--
-- Every account-owned table carries account_id as the first column of its primary key,
-- so the schema can be distributed by account_id (Citus) and every lookup is scoped.
-- Ids are UUIDv7 minted by the application.

CREATE TABLE users (
    id          uuid        PRIMARY KEY,
    email       text        NOT NULL CHECK (length(email) BETWEEN 3 AND 254),
    created_at  timestamptz NOT NULL
);
CREATE UNIQUE INDEX users_email_lower_key ON users (lower(email));

CREATE TABLE tokens (
    id            uuid        PRIMARY KEY,
    user_id       uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name          text        NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    token_hash    bytea       NOT NULL CHECK (length(token_hash) = 32),
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz,
    last_used_at  timestamptz,
    revoked_at    timestamptz,
    CONSTRAINT tokens_token_hash_key UNIQUE (token_hash)
);
CREATE INDEX tokens_user_id_idx ON tokens (user_id, created_at);

CREATE TABLE accounts (
    id              uuid        PRIMARY KEY,
    name            text        NOT NULL CHECK (length(name) BETWEEN 1 AND 800),
    click_tracking  boolean     NOT NULL DEFAULT false,
    open_tracking   boolean     NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL
);

CREATE TABLE memberships (
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    user_id     uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role        text        NOT NULL CHECK (role IN ('owner', 'member')),
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (account_id, user_id)
);
CREATE INDEX memberships_user_id_idx ON memberships (user_id);

-- Secrets are sealed by the application (XChaCha20-Poly1305 with the row bound in as
-- associated data); the database only ever sees ciphertext.
CREATE TABLE webhook_configs (
    account_id         uuid        PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    url                text        NOT NULL CHECK (length(url) BETWEEN 8 AND 2048),
    auth_type          text        NOT NULL CHECK (auth_type IN ('basic', 'bearer', 'none')),
    events             text[]      NOT NULL CHECK (cardinality(events) >= 1),
    username           text,
    password_or_token  bytea,
    signing_secret     bytea       NOT NULL,
    updated_at         timestamptz NOT NULL
);

CREATE TABLE templates (
    account_id                uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    id                        uuid        NOT NULL,
    name                      text        NOT NULL,
    slug                      text        NOT NULL CHECK (slug ~ '^[a-z0-9_-]{1,100}$'),
    subject                   text        NOT NULL,
    content                   text        NOT NULL,
    text_content              text,
    content_type              text        NOT NULL CHECK (content_type IN ('html', 'wysiwyg')),
    from_name                 text,
    from_email                text,
    cc                        text,
    bcc                       text,
    rcpt_name                 text,
    reply_to                  text,
    preferred_mail_server_id  uuid,
    click_tracking            boolean,
    open_tracking             boolean,
    created_at                timestamptz NOT NULL,
    updated_at                timestamptz NOT NULL,
    PRIMARY KEY (account_id, id),
    CONSTRAINT templates_account_id_slug_key UNIQUE (account_id, slug)
);

CREATE TABLE automations (
    account_id          uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    id                  uuid        NOT NULL,
    name                text        NOT NULL,
    template_id         uuid        NOT NULL,
    trigger_event_slug  text        NOT NULL,
    trigger_condition   text        NOT NULL CHECK (trigger_condition IN ('once', 'everytime')),
    timing_condition    text        NOT NULL CHECK (timing_condition IN ('immediately', 'x_days_after')),
    timing_value        integer     CHECK (timing_value BETWEEN 1 AND 3650),
    is_enabled          boolean     NOT NULL,
    created_at          timestamptz NOT NULL,
    PRIMARY KEY (account_id, id),
    -- A template cannot be deleted while an automation sends it.
    CONSTRAINT automations_template_fkey FOREIGN KEY (account_id, template_id)
        REFERENCES templates (account_id, id),
    CONSTRAINT automations_timing_value_presence_check
        CHECK ((timing_condition = 'x_days_after') = (timing_value IS NOT NULL)),
    CONSTRAINT automations_delayed_once_check
        CHECK (timing_condition = 'immediately' OR trigger_condition = 'once')
);
CREATE INDEX automations_trigger_idx ON automations (account_id, trigger_event_slug) WHERE is_enabled;
CREATE INDEX automations_template_idx ON automations (account_id, template_id);

CREATE TABLE topics (
    account_id   uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    id           uuid        NOT NULL,
    name         text        NOT NULL,
    description  text,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (account_id, id)
);
