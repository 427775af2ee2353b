#!/usr/bin/env bash
# Creates the scratch database $DB (default mailroom_slots_scratch) and applies every
# migration's up.sql in order, as diesel would (the files are plain SQL).
set -euo pipefail
DB=${DB:-mailroom_slots_scratch}
PSQL=(psql -h 127.0.0.1 -U postgres -v ON_ERROR_STOP=1 -q)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
"${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
for up in "$ROOT"/migrations/*/up.sql; do
  "${PSQL[@]}" -d "$DB" -f "$up"
done
echo "migrated $DB"
