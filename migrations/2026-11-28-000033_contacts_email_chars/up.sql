-- The contact list's email filter looks up a one-character needle (`z`, `ü`, `%`) in this
-- GIN index of each address's characters: `string_to_array(email_lower, NULL)` has one
-- element per character (GIN keeps each once per row), so `… @> ARRAY['z']` finds exactly
-- the addresses that contain `z`, whatever the character and the database's locale
-- (docs/console.md, "Short needles"). Trigrams cannot serve one character.
--
-- The expression is the adapter's `EMAIL_CHARS` (crates/postgres/src/repositories/
-- contacts.rs) character for character: PostgreSQL uses an expression index only for a
-- statement that repeats it. Like migration 26's, the index holds every account's
-- addresses and the account is checked on the rows found. IF NOT EXISTS lets an operator
-- build the index CONCURRENTLY beforehand (docs/operations.md).
CREATE INDEX IF NOT EXISTS contacts_email_chars_idx
    ON contacts USING gin (string_to_array(email_lower, NULL));
