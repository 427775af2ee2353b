-- Short, renewed message leases and the quarantine of messages whose claims keep ending
-- without an outcome (docs/operations.md, "Delivery engine").

-- Claims since the last outcome: the claim adds one, every state write (an outcome, a
-- skip, a failure) sets it back to zero. A message claimed again and again without an
-- outcome (its worker crashed while rendering or sending it) is quarantined as `failed`.
ALTER TABLE messages ADD COLUMN claims_without_outcome integer NOT NULL DEFAULT 0;

-- A worker renews the leases of everything it holds with one statement by its token.
CREATE INDEX messages_lease_token ON messages (lease_token) WHERE lease_token IS NOT NULL;
