-- Due lanes: one row per account that has messages waiting, so a worker finds the accounts
-- with due mail in a small table and claims each account's messages with `account_id` in
-- the WHERE clause (one shard on Citus), instead of one claim across every account's rows
-- (docs/operations.md, "Delivery engine").
--
-- A claim locks the lane rows it serves with FOR UPDATE SKIP LOCKED (workers spread over
-- accounts, never waiting for each other), claims those accounts' messages, and before it
-- commits sets each lane's `next_due_at` to when the account next has something to claim:
-- its earliest waiting message, or the end of a lease it has in flight (a dead worker's
-- messages come back then), never earlier than now, so accounts with a backlog take turns.

CREATE TABLE delivery_lanes (
    account_id   uuid        PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    -- NULL when nothing waits.
    next_due_at  timestamptz
);
CREATE INDEX delivery_lanes_due_idx ON delivery_lanes (next_due_at) WHERE next_due_at IS NOT NULL;

-- One account's waiting and in-flight rows by due time: the per-account claim.
CREATE INDEX messages_account_due_idx ON messages (account_id, next_attempt_at)
    WHERE status IN ('queued', 'sending');

-- Whatever makes a message `queued` (a send, an automation, an announcement batch, a
-- retry, a wait for a mail server) brings its lane forward, in the same transaction: one
-- statement-level trigger per statement, so a batch of thousands touches each lane once.
-- Lanes are locked in account order, so concurrent writers never wait in a cycle.
CREATE FUNCTION delivery_lanes_bring_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO delivery_lanes AS lane (account_id, next_due_at)
    SELECT account_id, min(next_attempt_at) FROM queued_rows
    WHERE status = 'queued'
    GROUP BY account_id
    ORDER BY account_id
    ON CONFLICT (account_id) DO UPDATE
        SET next_due_at = least(lane.next_due_at, EXCLUDED.next_due_at)
        WHERE lane.next_due_at IS NULL OR lane.next_due_at > EXCLUDED.next_due_at;
    RETURN NULL;
END
$$;

CREATE TRIGGER messages_inserted_bring_lanes_forward
    AFTER INSERT ON messages REFERENCING NEW TABLE AS queued_rows
    FOR EACH STATEMENT EXECUTE FUNCTION delivery_lanes_bring_forward();
CREATE TRIGGER messages_updated_bring_lanes_forward
    AFTER UPDATE ON messages REFERENCING NEW TABLE AS queued_rows
    FOR EACH STATEMENT EXECUTE FUNCTION delivery_lanes_bring_forward();

INSERT INTO delivery_lanes (account_id, next_due_at)
SELECT account_id, min(next_attempt_at) FROM messages
WHERE status IN ('queued', 'sending')
GROUP BY account_id;
