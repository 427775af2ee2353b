DROP INDEX IF EXISTS messages_recipient_idx;
DROP INDEX IF EXISTS messages_message_id_header_idx;
