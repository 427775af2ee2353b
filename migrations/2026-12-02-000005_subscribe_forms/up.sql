-- Public subscribe forms with double opt-in (docs/api-decisions.md, "Subscribe forms and
-- double opt-in"). Expand only: new tables, nullable columns (added without rewriting
-- the tables) and a wider CHECK, so the previous release runs on this schema.

-- A form of an account: the topics a post subscribes to, the attribute slugs it accepts,
-- whether a post waits for the address's owner to confirm, the template of that
-- confirmation and where the browser goes afterwards.
CREATE TABLE forms (
    account_id                uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    id                        uuid        NOT NULL,
    name                      text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    topic_ids                 uuid[]      NOT NULL,
    attributes                text[]      NOT NULL,
    double_opt_in             boolean     NOT NULL,
    confirmation_template_id  uuid,
    success_redirect_url      text        CHECK (length(success_redirect_url) <= 2048),
    confirmation_redirect_url text        CHECK (length(confirmation_redirect_url) <= 2048),
    created_at                timestamptz NOT NULL,
    updated_at                timestamptz NOT NULL,
    PRIMARY KEY (account_id, id),
    CONSTRAINT forms_bounded_lists CHECK (cardinality(topic_ids) <= 50 AND cardinality(attributes) <= 20),
    CONSTRAINT forms_confirmation_template CHECK (NOT double_opt_in OR confirmation_template_id IS NOT NULL)
);

-- One confirmation mail of a form to a contact: the id its signed link names, what the
-- post asked for (applied when the link is followed), and whether it was used.
CREATE TABLE form_confirmations (
    account_id   uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    id           uuid        NOT NULL,
    form_id      uuid        NOT NULL,
    contact_id   uuid        NOT NULL,
    attributes   jsonb       NOT NULL,
    created_at   timestamptz NOT NULL,
    confirmed_at timestamptz,
    PRIMARY KEY (account_id, id)
);

-- The cap on confirmation mails per address counts a contact's recent ones.
CREATE INDEX form_confirmations_contact_idx ON form_confirmations (account_id, contact_id, created_at);

-- A contact made by a double opt-in form waits, receiving nothing but its confirmation,
-- from `pending_since` until the link is followed (`confirmed_at`).
ALTER TABLE contacts ADD COLUMN pending_since timestamptz;
ALTER TABLE contacts ADD COLUMN confirmed_at timestamptz;

-- The confirmation mail of a form: the one message a pending contact may receive.
ALTER TABLE messages ADD COLUMN form_id uuid;

-- A subscription through a form is reported as `contact.subscribed`.
ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_event_type_check;
ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_event_type_check CHECK (event_type IN
    ('contact.bounced', 'contact.complained', 'contact.deleted', 'contact.unsubscribed',
     'contact.subscribed'));

ALTER TABLE messages DROP CONSTRAINT messages_skip_reason_check;
ALTER TABLE messages ADD CONSTRAINT messages_skip_reason_check CHECK (skip_reason IN
    ('bounce_blocked', 'complaint_blocked', 'unsubscribed', 'free_limit_capped', 'no_mail_server',
     'automation_disabled', 'contact_deleted', 'suppressed', 'pending_confirmation'));
