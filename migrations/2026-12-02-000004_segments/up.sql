-- Saved segments: a named audience definition an announcement can name instead of
-- repeating its conditions (docs/api-decisions.md, "Saved segments"). The definition is
-- the body of `POST …/contacts/search` as received and validated: the conditions
-- (`attributes`, the same JSON shape as announcements keep), `include_unsubscribed` and
-- an optional topic.
CREATE TABLE segments (
    account_id           uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    id                   uuid        NOT NULL,
    name                 text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    attributes           jsonb       NOT NULL DEFAULT '[]'::jsonb
                         CHECK (jsonb_typeof(attributes) = 'array'),
    include_unsubscribed boolean     NOT NULL,
    topic_id             uuid,
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    PRIMARY KEY (account_id, id),
    -- No action on delete: a topic a segment leaves out cannot be deleted (a 400) until
    -- the segment stops naming it. Clearing the column would widen the audience
    -- silently; deleting the segment would lose the sender's work.
    CONSTRAINT segments_topic_fkey FOREIGN KEY (account_id, topic_id)
        REFERENCES topics (account_id, id)
);

-- Names are unique per account, case-insensitively.
CREATE UNIQUE INDEX segments_account_id_name_key ON segments (account_id, lower(name));
-- The list's pages, oldest first.
CREATE INDEX segments_list_idx ON segments (account_id, created_at, id);
-- The foreign key's check when a topic is deleted.
CREATE INDEX segments_topic_idx ON segments (account_id, topic_id) WHERE topic_id IS NOT NULL;

-- The segment an announcement was made from, kept as history: no foreign key, since the
-- segment may be changed or deleted afterwards and the announcement keeps the copy of
-- the definition it was made with.
ALTER TABLE announcements ADD COLUMN segment_id uuid;
