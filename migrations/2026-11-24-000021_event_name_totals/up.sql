-- Event names (GET …/events/names) from a per-slug summary instead of an aggregate over
-- every event (docs/design.md, "Audience at scale").
--
-- Recording an event appends a row to contact_event_increments (insert-only: concurrent
-- events never wait on one counter row); deleting a contact appends negative counts for
-- its events. A worker folds increments into contact_event_totals, one row per name, in
-- batches; a read adds the totals and the increments not folded yet.
CREATE TABLE contact_event_totals (
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    slug        text        NOT NULL,
    count       bigint      NOT NULL,
    last_seen   timestamptz,
    PRIMARY KEY (account_id, slug)
);

CREATE TABLE contact_event_increments (
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    id          bigint      GENERATED ALWAYS AS IDENTITY,
    slug        text        NOT NULL,
    count       bigint      NOT NULL,
    -- NULL for the negative counts of a deleted contact: the latest time stays.
    last_seen   timestamptz,
    PRIMARY KEY (account_id, id)
);
CREATE INDEX contact_event_increments_account_idx ON contact_event_increments (account_id, slug);

INSERT INTO contact_event_totals (account_id, slug, count, last_seen)
SELECT account_id, slug, count(*), max(occurred_at) FROM contact_events GROUP BY account_id, slug;
