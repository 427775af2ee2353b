-- Upkeep without triggers: the repository keeps the due lanes, the announcement counters
-- and the typed slots up to date, and keeps the owner's membership, in the same
-- transaction as the write that changes them (crates/postgres/src/upkeep.rs;
-- docs/operations.md, "Upkeep in the repository"). Citus distributes no table that has a
-- trigger, and a statement trigger's transition table is not found on a shard, so the
-- schema has none; the same statements run on plain PostgreSQL and on a cluster.
--
-- The tables the triggers kept are consistent with their rows when this runs (the
-- triggers kept them so until now), and the code that keeps them from now on is the code
-- that runs this migration: nothing is recomputed. `message_state` stays: the SQL that
-- counts by state uses it.

-- Due lanes (migrations 14, 30, 35): the repository brings a lane forward after every
-- statement that makes a row wait for a worker, from the due times it wrote.
DROP TRIGGER messages_inserted_bring_lanes_forward ON messages;
DROP TRIGGER messages_updated_bring_lanes_forward ON messages;
DROP FUNCTION delivery_lanes_bring_forward();
DROP TRIGGER webhook_events_inserted_bring_lanes_forward ON webhook_events;
DROP TRIGGER webhook_events_updated_bring_lanes_forward ON webhook_events;
DROP FUNCTION webhook_lanes_bring_forward();

-- Announcement counters (migrations 25, 35): the repository adds each statement's
-- changes of state, first opens and first clicks to its backend's slot row.
DROP TRIGGER messages_inserted_count_announcements ON messages;
DROP TRIGGER messages_updated_count_announcements ON messages;
DROP TRIGGER messages_deleted_count_announcements ON messages;
DROP FUNCTION announcement_counters_on_insert();
DROP FUNCTION announcement_counters_on_update();
DROP FUNCTION announcement_counters_on_delete();
DROP TRIGGER message_tracking_inserted_count_announcements ON message_tracking;
DROP TRIGGER message_tracking_updated_count_announcements ON message_tracking;
DROP FUNCTION announcement_engagement_on_insert();
DROP FUNCTION announcement_engagement_on_update();

-- Typed slots (migration 31): a new custom meta takes its slot in the insert itself,
-- after the same advisory lock, and fills it from the values its slug has; every write of
-- attribute values copies the slotted values it wrote into their contacts' slot rows.
DROP TRIGGER attribute_metas_take_slot ON attribute_metas;
DROP FUNCTION attribute_metas_take_slot();
DROP TRIGGER attribute_metas_fill_slot ON attribute_metas;
DROP FUNCTION attribute_metas_fill_slot();
DROP TRIGGER contact_slots_copy_inserted ON contact_attributes;
DROP TRIGGER contact_slots_copy_updated ON contact_attributes;
DROP FUNCTION contact_slots_copy();

-- The owner stays (migration 17): the one statement that changes a member's role and the
-- one that removes a member leave the owner's row alone; `memberships_one_owner` keeps
-- one owner per account.
DROP TRIGGER memberships_owner_stays ON memberships;
DROP FUNCTION memberships_owner_stays();
