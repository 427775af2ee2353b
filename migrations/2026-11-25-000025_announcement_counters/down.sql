ALTER TABLE messages DROP COLUMN test;
DROP INDEX messages_announcement_list_idx;
DROP TRIGGER message_tracking_updated_count_announcements ON message_tracking;
DROP TRIGGER message_tracking_inserted_count_announcements ON message_tracking;
DROP FUNCTION announcement_engagement_on_update();
DROP FUNCTION announcement_engagement_on_insert();
DROP TRIGGER messages_deleted_count_announcements ON messages;
DROP TRIGGER messages_updated_count_announcements ON messages;
DROP TRIGGER messages_inserted_count_announcements ON messages;
DROP FUNCTION announcement_counters_on_delete();
DROP FUNCTION announcement_counters_on_update();
DROP FUNCTION announcement_counters_on_insert();
-- The first version's helper, on a database migrated before it was folded into the triggers.
DROP FUNCTION IF EXISTS announcement_counters_add(jsonb);
DROP TABLE announcement_counters;
