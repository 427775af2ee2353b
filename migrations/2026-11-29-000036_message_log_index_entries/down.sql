DROP INDEX messages_status_idx;
CREATE INDEX messages_status_idx ON messages (account_id, status, created_at, id);
CREATE INDEX messages_message_id_header_idx ON messages (account_id, message_id_header);
ALTER TABLE messages DROP CONSTRAINT messages_message_id_header_names_id;
