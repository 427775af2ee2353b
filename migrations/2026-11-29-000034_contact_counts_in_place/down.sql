ALTER TABLE contacts RESET (fillfactor);
CREATE INDEX contacts_message_count_idx ON contacts (account_id, message_count, id);
