-- The contact list's email filter looks up a two-character needle of letters or digits
-- (`zq`) in the trigram index of migration 26: an address of printable ASCII contains
-- `zq` exactly when it has a trigram beginning with `zq` (docs/console.md, "Short
-- needles"). An address with any other character (an internationalised domain,
-- `bücher.example`) may contain it without such a trigram, so the list reads those from
-- this partial index, by account, and checks the needle on each.
--
-- The predicate is the adapter's `OUTSIDE_ASCII` (crates/postgres/src/repositories/
-- contacts.rs) character for character: PostgreSQL uses a partial index only for a
-- statement that repeats it. IF NOT EXISTS lets an operator build the index CONCURRENTLY
-- beforehand (docs/operations.md), as for migration 26.
CREATE INDEX IF NOT EXISTS contacts_email_outside_ascii_idx
    ON contacts (account_id) WHERE email_lower ~ '[^ -~]';
