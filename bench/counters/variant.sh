#!/bin/bash
# variant.sh none|old|v2|v3: enables one copy of the counting triggers (see setup.sh) in the
# bench database ($PGDATABASE, default counters_bench); the migration's own stay disabled.
set -euo pipefail
export PGHOST=${PGHOST:-127.0.0.1} PGUSER=${PGUSER:-postgres}
m="" t=""
for s in announcements old v2 v3; do
  if [ "$s" = "$1" ]; then op=ENABLE; else op=DISABLE; fi
  m="$m, $op TRIGGER messages_inserted_count_$s, $op TRIGGER messages_updated_count_$s, $op TRIGGER messages_deleted_count_$s"
  t="$t, $op TRIGGER message_tracking_inserted_count_$s, $op TRIGGER message_tracking_updated_count_$s"
done
psql -X -q -v ON_ERROR_STOP=1 -d "${PGDATABASE:-counters_bench}" \
  -c "BEGIN; ALTER TABLE messages ${m#, }; ALTER TABLE message_tracking ${t#, }; COMMIT;"
