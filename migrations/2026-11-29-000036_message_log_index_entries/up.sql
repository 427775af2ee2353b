-- Two fewer index entries for most message writes (docs/operations.md, "What lists and
-- counts read"; docs/performance.md, "Design choices, measured"). A record (queued → sent) is never
-- HOT, since it changes `status` and `next_attempt_at`, so it writes an entry into every
-- index whose predicate the new row version matches.

-- The `Message-ID` header embeds the message's id (`<id@domain>`, the domain's
-- `message_id_header`), so feedback finds a message by its key and compares the header:
-- the header's own index went. The CHECK keeps every row in that form, so no message can
-- be stored that the key lookup would miss.
ALTER TABLE messages ADD CONSTRAINT messages_message_id_header_names_id
    CHECK (starts_with(message_id_header, '<' || id::text || '@')) NOT VALID;
ALTER TABLE messages VALIDATE CONSTRAINT messages_message_id_header_names_id;
DROP INDEX messages_message_id_header_idx;

-- The log by status keeps an index for the statuses a filter picks out of the log
-- (pending, failed, bounced, skipped), not for `sent`: most of a log is sent, so the
-- log's own index (`messages_list_idx`) finds a page of sent messages by reading a few
-- rows more than it returns, and a delivered message no longer writes an entry here.
DROP INDEX messages_status_idx;
CREATE INDEX messages_status_idx ON messages (account_id, status, created_at, id)
    WHERE status <> 'sent';
