-- Webhook lanes: one row per account with webhook events waiting, as `delivery_lanes` is
-- for messages (migration 14). The webhook worker locks a few due lanes, claims each
-- account's events with `account_id` in the WHERE clause (one shard on Citus) and at most
-- its share and its room (an account never holds more attempts in flight than the worker
-- allows it), then sets each lane's `next_due_at`. Before this, one claim read the
-- cross-account due index: one account's backlog filled whole claims, and an account the
-- worker skipped was stepped over row by row on every claim (docs/operations.md,
-- "Delivery engine", "Webhooks").

CREATE TABLE webhook_lanes (
    account_id   uuid        PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    -- NULL when nothing waits.
    next_due_at  timestamptz
);
CREATE INDEX webhook_lanes_due_idx ON webhook_lanes (next_due_at) WHERE next_due_at IS NOT NULL;

-- One account's pending events by due time (the per-account claim and the queue-depth
-- gauge), and one account's leased events (the lane's next due time while attempts are
-- in flight). The cross-account due index is no longer read.
CREATE INDEX webhook_events_account_due_idx ON webhook_events (account_id, next_attempt_at)
    WHERE status IN ('queued', 'retrying');
CREATE INDEX webhook_events_account_leased_idx ON webhook_events (account_id)
    WHERE lease_token IS NOT NULL;
DROP INDEX webhook_events_due_idx;

-- Whatever makes an event pending (a new event, a manual retry, an attempt that will be
-- retried) brings its lane forward in the same transaction: one statement-level trigger
-- per statement, lanes locked in account order so concurrent writers never wait in a
-- cycle. A claim's own lease stamp also fires it; the claim reschedules its lanes after.
CREATE FUNCTION webhook_lanes_bring_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_lanes AS lane (account_id, next_due_at)
    SELECT account_id, min(next_attempt_at) FROM pending_rows
    WHERE status IN ('queued', 'retrying') AND lease_token IS NULL
    GROUP BY account_id
    ORDER BY account_id
    ON CONFLICT (account_id) DO UPDATE
        SET next_due_at = least(lane.next_due_at, EXCLUDED.next_due_at)
        WHERE lane.next_due_at IS NULL OR lane.next_due_at > EXCLUDED.next_due_at;
    RETURN NULL;
END
$$;

CREATE TRIGGER webhook_events_inserted_bring_lanes_forward
    AFTER INSERT ON webhook_events REFERENCING NEW TABLE AS pending_rows
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_lanes_bring_forward();
CREATE TRIGGER webhook_events_updated_bring_lanes_forward
    AFTER UPDATE ON webhook_events REFERENCING NEW TABLE AS pending_rows
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_lanes_bring_forward();

INSERT INTO webhook_lanes (account_id, next_due_at)
SELECT account_id, min(coalesce(locked_until, next_attempt_at)) FROM webhook_events
WHERE status IN ('queued', 'retrying')
GROUP BY account_id;
