#!/usr/bin/env bash
# B. The write cost of the slots: pgbench of what the code runs for one attribute write,
# without and with the slot write folded into the same statement (no extra round trip),
# alternating (base, slots, base, slots); tps, average latency and WAL bytes per
# transaction (pg_current_wal_lsn before and after: cluster-wide, so other databases'
# writes in the same seconds count too).
#   events: POST …/events for known contacts, as bench/src/events.rs scripts it
#           (membership check; contact upsert, meta read, event + increment + event.<slug>
#           date, automations), plus the d2/d3/d4 slot of event.<slug>;
#   patch:  a contact PATCH of `score`: the contact by email, the attribute upsert of
#           ContactRepository::set_attributes (all four value columns), plus slot n1.
set -euo pipefail
DB=${DB:-mailroom_slots_scratch}
CLIENTS=${CLIENTS:-8}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-20}
ACCT=${ACCT:-01930000-0000-7000-8000-000000000001}
USER_ID=${USER_ID:-01930000-0000-7000-8000-000000000002}
CONTACTS=${CONTACTS:-1000000}
DIR=$(mktemp -d)
ID="(lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') || substr(md5(random()::text), 1, 20))::uuid"
SLUG="(ARRAY['signed_up', 'opened_email', 'purchased'])[:k]"
EMAIL="'user' || :n::text || '@bench.example'"

events_head() {
  cat <<SQL
\\set n random(0, :contacts - 1)
\\set k random(1, 3)
BEGIN;
SELECT role FROM memberships WHERE account_id = :account AND user_id = :user LIMIT 1;
COMMIT;
BEGIN;
WITH inserted AS (INSERT INTO contacts (account_id, id, email, created_at) VALUES (:account, $ID, $EMAIL, now()) ON CONFLICT (account_id, email_lower) DO NOTHING RETURNING id) SELECT id AS contact, TRUE AS created FROM inserted UNION ALL SELECT id, FALSE FROM contacts WHERE account_id = :account AND email_lower = lower($EMAIL) AND NOT EXISTS (SELECT 1 FROM inserted) LIMIT 1 \\gset
SELECT slug, attribute_type FROM attribute_metas WHERE account_id = :account AND slug = ANY(ARRAY['event.' || $SLUG]);
SQL
}
event_write() { # $1: the slot CTE, or nothing
  echo "WITH event AS (INSERT INTO contact_events (account_id, id, contact_id, slug, occurred_at) VALUES (:account, $ID, :contact, $SLUG, now())), increment AS (INSERT INTO contact_event_increments (account_id, slug, count, last_seen) VALUES (:account, $SLUG, 1, now()))$1 INSERT INTO contact_attributes (account_id, contact_id, slug, date_value) VALUES (:account, :contact, 'event.' || $SLUG, now()) ON CONFLICT (account_id, contact_id, slug) DO UPDATE SET date_value = GREATEST(contact_attributes.date_value, excluded.date_value);"
}
events_tail() {
  cat <<SQL
SELECT id, name, template_id, trigger_event_slug, trigger_condition, timing_condition, timing_value, is_enabled, created_at FROM automations WHERE account_id = :account AND trigger_event_slug = $SLUG AND is_enabled = true ORDER BY created_at, id;
COMMIT;
SQL
}
slot_cte() { # $1: slot column
  echo ", slot AS (INSERT INTO contact_slots (account_id, contact_id, $1) VALUES (:account, :contact, now()) ON CONFLICT (account_id, contact_id) DO UPDATE SET $1 = GREATEST(contact_slots.$1, excluded.$1))"
}
{ events_head; event_write ""; events_tail; } > "$DIR/events_base.sql"
{ events_head
  echo '\if :k = 1'; event_write "$(slot_cte d2)"
  echo '\elif :k = 2'; event_write "$(slot_cte d3)"
  echo '\else'; event_write "$(slot_cte d4)"
  echo '\endif'; events_tail; } > "$DIR/events_slots.sql"
patch_script() { # $1: the slot CTE, or nothing
  cat <<SQL
\\set n random(0, :contacts - 1)
\\set v random(0, 1000)
BEGIN;
SELECT id AS contact FROM contacts WHERE account_id = :account AND email_lower = $EMAIL \\gset
WITH attribute AS (INSERT INTO contact_attributes (account_id, contact_id, slug, string_value, number_value, bool_value, date_value) VALUES (:account, :contact, 'score', NULL, :v, NULL, NULL) ON CONFLICT (account_id, contact_id, slug) DO UPDATE SET string_value = excluded.string_value, number_value = excluded.number_value, bool_value = excluded.bool_value, date_value = excluded.date_value RETURNING 1)$1 SELECT count(*) FROM attribute;
COMMIT;
SQL
}
patch_script "" > "$DIR/patch_base.sql"
patch_script ", slot AS (UPDATE contact_slots SET n1 = :v WHERE account_id = :account AND contact_id = :contact)" > "$DIR/patch_slots.sql"

lsn() { psql -h 127.0.0.1 -U postgres -d "$DB" -XAtc "SELECT pg_current_wal_lsn()"; }
printf "%-14s %8s %10s %12s %14s  %s\n" script tps "lat ms" transactions "WAL B/tx" "load"
for round in 1 2; do
  for script in events_base events_slots patch_base patch_slots; do
    before=$(lsn)
    out=$(PGOPTIONS="-c statement_timeout=15000" pgbench -h 127.0.0.1 -U postgres --no-vacuum \
      --protocol=prepared --jobs=2 --client="$CLIENTS" --time="$SECONDS_PER_RUN" \
      --define=account="$ACCT" --define=user="$USER_ID" --define=contacts="$CONTACTS" \
      --file="$DIR/$script.sql" "$DB" 2>&1)
    after=$(lsn)
    tx=$(echo "$out" | awk '/number of transactions actually processed/ {print $NF}' | cut -d/ -f1)
    tps=$(echo "$out" | awk '/^tps = / {print $3}')
    lat=$(echo "$out" | awk '/^latency average = / {print $4}')
    wal=$(psql -h 127.0.0.1 -U postgres -d "$DB" -XAtc "SELECT round(pg_wal_lsn_diff('$after', '$before') / $tx)")
    printf "%-14s %8.0f %10s %12s %14s  %s\n" "$script" "$tps" "$lat" "$tx" "$wal" "$(cut -d' ' -f1-3 /proc/loadavg)"
  done
done
rm -rf "$DIR"
