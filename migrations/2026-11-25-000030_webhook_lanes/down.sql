DROP TRIGGER webhook_events_updated_bring_lanes_forward ON webhook_events;
DROP TRIGGER webhook_events_inserted_bring_lanes_forward ON webhook_events;
DROP FUNCTION webhook_lanes_bring_forward();
CREATE INDEX webhook_events_due_idx
    ON webhook_events (next_attempt_at)
    WHERE status IN ('queued', 'retrying');
DROP INDEX webhook_events_account_leased_idx;
DROP INDEX webhook_events_account_due_idx;
DROP TABLE webhook_lanes;
