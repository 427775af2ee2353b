-- Delivering a message adds one to its contact's `message_count` (one grouped UPDATE per
-- record batch). With `contacts_message_count_idx` indexing the column, every such update
-- wrote a whole new contact row version and an entry in each of the table's eleven
-- indexes, the two GIN indexes of the email filter among them: about a quarter of
-- PostgreSQL's time per delivered message. Without an index on the column the update can
-- be HOT (heap-only): the new version goes on the same page and no index is touched.
--
-- The price is the contact list sorted by `messageCount`, which now reads the account's
-- contacts and keeps the top of them (a top-N sort) instead of walking an index: about
-- 0.1 s at a million contacts, against about 1 ms before. Every other sort keeps its
-- index. docs/performance.md ("Design choices, measured") has the figures and why
-- this trade was made.
DROP INDEX IF EXISTS contacts_message_count_idx;

-- Room on each page for the new versions (new and rewritten pages only): a HOT update
-- needs free space on the row's own page, and pages are pruned of dead versions as they
-- are read, so a tenth kept free covers a page's worth of counts between prunings.
ALTER TABLE contacts SET (fillfactor = 90);
