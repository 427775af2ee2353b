-- The topic unsubscriptions of deleted contacts, kept by the address's keyed hash (the
-- same hash as `suppressions`), so that a contact made again for the address does not
-- get a topic's announcements it had left. The claim gives them back to the new contact
-- the first time it claims mail for the address, and drops them from here.
CREATE TABLE topic_suppressions (
    account_id   uuid        NOT NULL,
    address_hash bytea       NOT NULL CHECK (octet_length(address_hash) = 32),
    topic_id     uuid        NOT NULL,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (account_id, address_hash, topic_id),
    FOREIGN KEY (account_id, topic_id) REFERENCES topics (account_id, id) ON DELETE CASCADE
);
