DROP INDEX messages_lease_token;
ALTER TABLE messages DROP COLUMN claims_without_outcome;
