-- Tracking (docs/design.md#8-delivery): per message, the links its click tokens number (position =
-- array index, 0-based, as the token carries it) and its first open and first click.
--
-- A table of its own rather than columns on `messages`: the hot outbox rows stay narrow,
-- and only messages with tracking or engagement get a row. The worker writes `links`
-- in the claim's transaction; the public endpoints set `opened_at` / `clicked_at` once
-- (INSERT … ON CONFLICT … WHERE … IS NULL), which is what counts first opens and clicks
-- exactly once under concurrent requests.

CREATE TABLE message_tracking (
    account_id  uuid        NOT NULL,
    message_id  uuid        NOT NULL,
    links       text[]      NOT NULL DEFAULT '{}',
    opened_at   timestamptz,
    clicked_at  timestamptz,
    PRIMARY KEY (account_id, message_id),
    FOREIGN KEY (account_id, message_id) REFERENCES messages (account_id, id) ON DELETE CASCADE
);
