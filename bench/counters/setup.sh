#!/bin/bash
# setup.sh [DB]: a scratch database for measuring the announcement counters' triggers
# (docs/operations.md, "Announcement counters"), as they were before the repository kept
# the counters. Applies the migrations up to then, seeds two
# accounts of 50,000 messages each (one announcement's, one transactional), and installs
# three copies of the counting triggers beside the migration's own (which it disables):
# `_old`, the first version (through jsonb and a SQL function, commit 58ea372); `_v2`,
# direct upserts with the old/new join (commit 3db731d); `_v3`, the migration's current
# text (no join). variant.sh then switches between none, old, v2 and v3.
set -euo pipefail
export PGHOST=${PGHOST:-127.0.0.1} PGUSER=${PGUSER:-postgres}
DB=${1:-counters_bench}
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd)
mig=migrations/2026-11-25-000025_announcement_counters/up.sql
dropdb --if-exists "$DB"; createdb "$DB"
# The schema as it was while triggers kept the counters: the migrations before the one
# that moved their upkeep into the repository.
for d in "$root"/migrations/*/; do
  case "$d" in *_upkeep_without_triggers/) break ;; esac
  psql -X -q -v ON_ERROR_STOP=1 -1 -d "$DB" -f "$d/up.sql" >/dev/null
done
psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -f "$here/seed.sql"
# The functions and triggers of a version of migration `2026-11-25-000025_announcement_counters`, renamed with a suffix.
copy() { # copy SUFFIX < up.sql
  python3 -c '
import sys
s = sys.stdin.read(); x = sys.argv[1]
a = s.index("CREATE FUNCTION announcement_counters_"); b = s.index("-- The counts of announcements that exist already.")
print(s[a:b].replace("announcement_counters_add", "counters_add_" + x)
      .replace("announcement_counters_on_", x + "_counters_on_")
      .replace("announcement_engagement_on_", x + "_engagement_on_")
      .replace("_count_announcements", "_count_" + x))' "$1"
}
git -C "$root" show "58ea372:$mig" | copy old | psql -X -q -v ON_ERROR_STOP=1 -d "$DB"
git -C "$root" show "3db731d:$mig" | copy v2 | psql -X -q -v ON_ERROR_STOP=1 -d "$DB"
copy v3 < "$root/$mig" | psql -X -q -v ON_ERROR_STOP=1 -d "$DB"
PGDATABASE=$DB "$here/variant.sh" none
