#!/usr/bin/env bash
# Times the count blocks of $STATEMENTS (default count_statements.sql), ROUNDS times each (default 40),
# interleaved (every round runs every block once, in file order) on one connection,
# after 3 warm-up rounds; prints p50/p95 (nearest rank, as bench/src/stats.rs) of each
# label and of the adapter's whole transaction, the counts, and the load average.
set -euo pipefail
DB=${DB:-mailroom_slots_scratch}
ROUNDS=${ROUNDS:-40}
ACCT=${ACCT:-01930000-0000-7000-8000-000000000001}
HERE=$(cd "$(dirname "$0")" && pwd)
STATEMENTS=${STATEMENTS:-$HERE/count_statements.sql}
OUT=$(mktemp)
{
  echo '\timing on'
  for _ in $(seq 1 $((ROUNDS + 3))); do cat "$STATEMENTS"; done
} | grep -v '^--' > "$OUT.sql"
echo "load before: $(cat /proc/loadavg)"
psql -h 127.0.0.1 -U postgres -d "$DB" -X -At -v ON_ERROR_STOP=1 -v acct="$ACCT" -f "$OUT.sql" > "$OUT"
echo "load after:  $(cat /proc/loadavg)"
awk -v rounds="$ROUNDS" '
  /^@/ { label = substr($0, 2); if (label == "flat") round++; next }
  /^Time: / { if (round > 3) { t[label, round] += $2; seen[label] = 1 } next }
  /^[0-9]+$/ { answer[label] = $0 }
  /^\{/ { answer[label] = $0 }
  END {
    for (l in seen) for (r = 4; r <= round; r++) print l, t[l, r]
    for (r = 4; r <= round; r++) {
      if (seen["adapter_count"]) print "adapter_total", t["adapter_begin", r] + t["adapter_sizing", r] + t["adapter_set", r] + t["adapter_count", r] + t["adapter_reset", r] + t["adapter_commit", r]
      if (seen["part_count"]) print "part_total", t["part_set", r] + t["part_count", r] + t["part_commit", r]
      if (seen["merge_count"]) print "merge_total", t["merge_set", r] + t["merge_count", r] + t["merge_commit", r]
    }
    for (l in answer) print "answer", l, answer[l] > "/dev/stderr"
  }' "$OUT" 2> "$OUT.answers" | sort -k1,1 -k2,2g | awk '
  { v[$1, ++n[$1]] = $2 }
  END {
    printf "%-16s %6s %10s %10s\n", "label", "runs", "p50 ms", "p95 ms"
    for (l in n) {
      c = n[l]; r50 = int(0.5 * c + 0.999999); r95 = int(0.95 * c + 0.999999)
      printf "%-16s %6d %10.1f %10.1f\n", l, c, v[l, r50], v[l, r95]
    }
  }' | sort
sort "$OUT.answers"
rm -f "$OUT" "$OUT.sql" "$OUT.answers"
