-- Feedback intake (POST …/feedback) finds the message a complaint or late bounce is
-- about by the original Message-ID, else by the most recent message to the recipient.
-- Both lookups are per account; without these indexes each would scan the account's
-- whole message history.
CREATE INDEX messages_message_id_header_idx ON messages (account_id, message_id_header);
CREATE INDEX messages_recipient_idx ON messages (account_id, lower(email), created_at);
