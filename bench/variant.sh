#!/bin/sh
# variant.sh none|old|v2 : enables one set of counting triggers in the bench database.
set -e
v=$1
q="ALTER TABLE messages DISABLE TRIGGER messages_inserted_count_announcements, DISABLE TRIGGER messages_updated_count_announcements, DISABLE TRIGGER messages_deleted_count_announcements, DISABLE TRIGGER messages_inserted_count_v2, DISABLE TRIGGER messages_updated_count_v2, DISABLE TRIGGER messages_deleted_count_v2;"
q="$q ALTER TABLE message_tracking DISABLE TRIGGER message_tracking_inserted_count_announcements, DISABLE TRIGGER message_tracking_updated_count_announcements, DISABLE TRIGGER message_tracking_inserted_count_v2, DISABLE TRIGGER message_tracking_updated_count_v2;"
case $v in
  old) s=announcements;; v2) s=v2;; none) s=;;
esac
if [ -n "$s" ]; then
  q="$q ALTER TABLE messages ENABLE TRIGGER messages_inserted_count_$s, ENABLE TRIGGER messages_updated_count_$s, ENABLE TRIGGER messages_deleted_count_$s;"
  q="$q ALTER TABLE message_tracking ENABLE TRIGGER message_tracking_inserted_count_$s, ENABLE TRIGGER message_tracking_updated_count_$s;"
fi
psql -q -v ON_ERROR_STOP=1 -d counters_bench -c "BEGIN; $q COMMIT;"
