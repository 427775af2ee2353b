-- The audience: contacts, their typed attributes, recorded events and topic
-- unsubscriptions.
--
-- Attributes are stored one row per (contact, slug) in typed columns, so every condition
-- family (string, number, date, boolean) is served by a btree index on
-- (account_id, slug, value, contact_id); JSONB with GIN cannot serve range conditions.
-- Event attributes `event.<slug>` live here too, as the date of the latest such event.

CREATE TABLE contacts (
    account_id       uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    id               uuid        NOT NULL,
    email            text        NOT NULL CHECK (length(email) BETWEEN 3 AND 254),
    email_lower      text        NOT NULL GENERATED ALWAYS AS (lower(email)) STORED,
    created_at       timestamptz NOT NULL,
    hard_bounced_at  timestamptz,
    complaint_at     timestamptz,
    unsubscribed_at  timestamptz,
    message_count    integer     NOT NULL DEFAULT 0 CHECK (message_count >= 0),
    -- lower() of the `name` custom attribute when it is a string, for sortBy=name.
    sort_name        text,
    PRIMARY KEY (account_id, id),
    CONSTRAINT contacts_account_id_email_key UNIQUE (account_id, email_lower)
);
CREATE INDEX contacts_created_at_idx ON contacts (account_id, created_at, id);
CREATE INDEX contacts_sort_name_idx ON contacts (account_id, sort_name, id);
CREATE INDEX contacts_message_count_idx ON contacts (account_id, message_count, id);

CREATE TABLE attribute_metas (
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    slug        text        NOT NULL CHECK (length(slug) BETWEEN 1 AND 110),
    attribute_type text     NOT NULL CHECK (attribute_type IN ('string', 'number', 'boolean', 'date')),
    source      text        NOT NULL CHECK (source IN ('custom', 'event')),
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (account_id, slug)
);

CREATE TABLE contact_attributes (
    account_id    uuid             NOT NULL,
    contact_id    uuid             NOT NULL,
    slug          text             NOT NULL,
    string_value  text             CHECK (length(string_value) <= 1000),
    number_value  double precision,
    bool_value    boolean,
    date_value    timestamptz,
    PRIMARY KEY (account_id, contact_id, slug),
    FOREIGN KEY (account_id, contact_id) REFERENCES contacts (account_id, id) ON DELETE CASCADE,
    CONSTRAINT contact_attributes_one_value_check
        CHECK (num_nonnulls(string_value, number_value, bool_value, date_value) = 1)
);
CREATE INDEX contact_attributes_string_idx
    ON contact_attributes (account_id, slug, lower(string_value), contact_id) WHERE string_value IS NOT NULL;
CREATE INDEX contact_attributes_number_idx
    ON contact_attributes (account_id, slug, number_value, contact_id) WHERE number_value IS NOT NULL;
CREATE INDEX contact_attributes_bool_idx
    ON contact_attributes (account_id, slug, bool_value, contact_id) WHERE bool_value IS NOT NULL;
CREATE INDEX contact_attributes_date_idx
    ON contact_attributes (account_id, slug, date_value, contact_id) WHERE date_value IS NOT NULL;

CREATE TABLE contact_events (
    account_id   uuid        NOT NULL,
    id           uuid        NOT NULL,
    contact_id   uuid        NOT NULL,
    slug         text        NOT NULL CHECK (length(slug) BETWEEN 1 AND 100),
    occurred_at  timestamptz NOT NULL,
    PRIMARY KEY (account_id, id),
    FOREIGN KEY (account_id, contact_id) REFERENCES contacts (account_id, id) ON DELETE CASCADE
);
CREATE INDEX contact_events_contact_idx ON contact_events (account_id, contact_id, occurred_at);
CREATE INDEX contact_events_slug_idx ON contact_events (account_id, slug, occurred_at);

CREATE TABLE topic_unsubscriptions (
    account_id  uuid        NOT NULL,
    contact_id  uuid        NOT NULL,
    topic_id    uuid        NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (account_id, contact_id, topic_id),
    FOREIGN KEY (account_id, contact_id) REFERENCES contacts (account_id, id) ON DELETE CASCADE,
    FOREIGN KEY (account_id, topic_id) REFERENCES topics (account_id, id) ON DELETE CASCADE
);
CREATE INDEX topic_unsubscriptions_topic_idx ON topic_unsubscriptions (account_id, topic_id, contact_id);
