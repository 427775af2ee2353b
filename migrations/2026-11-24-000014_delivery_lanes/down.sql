DROP TRIGGER messages_updated_bring_lanes_forward ON messages;
DROP TRIGGER messages_inserted_bring_lanes_forward ON messages;
DROP FUNCTION delivery_lanes_bring_forward();
DROP INDEX messages_account_due_idx;
DROP TABLE delivery_lanes;
