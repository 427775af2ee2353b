-- Audience at scale: the indexes the segment plans read (docs/design.md, "Audience at
-- scale").
--
-- The string index carries the raw value too: PostgreSQL answers from an index alone
-- (index-only scan) only when every column the query names is in the index, and the
-- expression lower(string_value) does not count as string_value. With it, a string
-- condition's contact set is read without visiting the table, like the other types.
DROP INDEX contact_attributes_string_idx;
CREATE INDEX contact_attributes_string_idx
    ON contact_attributes (account_id, slug, lower(string_value), contact_id)
    INCLUDE (string_value) WHERE string_value IS NOT NULL;

-- The unsubscribed contacts of an account, so a segment that leaves them out subtracts a
-- small set instead of reading every contact.
CREATE INDEX contacts_unsubscribed_idx
    ON contacts (account_id, id) WHERE unsubscribed_at IS NOT NULL;
