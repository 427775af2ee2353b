-- Run 2 of 04_time.sh (STATEMENTS=count_statements_serial.sql): flat, the adapter and
-- the slots as in count_statements.sql, and flat and slots without parallel workers.

\echo @flat
SELECT count(*) FROM bench_flat WHERE lower(plan) = lower('pro') AND score > 500 AND renewal >= '2026-07-02T00:00:00Z';

-- The adapter (crates/postgres/src/repositories/segments.rs): its transaction with the
-- sizing statement (set_sizes, cap 5,000), the Intersection plan's SET LOCALs, the count
-- (push_intersection, smallest set first: plan, score, renewal) and the reset.
\echo @adapter_begin
BEGIN;
\echo @adapter_sizing
SELECT ARRAY[(SELECT count(*) FROM (SELECT a.contact_id FROM contact_attributes a WHERE a.account_id = :'acct' AND a.slug = 'plan' AND a.string_value IS NOT NULL AND lower(a.string_value) = lower('pro') LIMIT 5000) s), (SELECT count(*) FROM (SELECT a.contact_id FROM contact_attributes a WHERE a.account_id = :'acct' AND a.slug = 'score' AND a.number_value IS NOT NULL AND a.number_value > 500 LIMIT 5000) s), (SELECT count(*) FROM (SELECT a.contact_id FROM contact_attributes a WHERE a.account_id = :'acct' AND a.slug = 'renewal' AND a.date_value IS NOT NULL AND a.date_value >= '2026-07-02T00:00:00Z' LIMIT 5000) s)]::bigint[] AS sizes;
\echo @adapter_set
SET LOCAL join_collapse_limit = 1; SET LOCAL enable_nestloop = off; SET LOCAL enable_mergejoin = off; SET LOCAL work_mem = '32MB';
\echo @adapter_count
SELECT count(*) AS count FROM (SELECT a.contact_id FROM contact_attributes a WHERE a.account_id = :'acct' AND a.slug = 'plan' AND a.string_value IS NOT NULL AND lower(a.string_value) = lower('pro')) s0 JOIN (SELECT a.contact_id FROM contact_attributes a WHERE a.account_id = :'acct' AND a.slug = 'score' AND a.number_value IS NOT NULL AND a.number_value > 500) s1 ON s1.contact_id = s0.contact_id JOIN (SELECT a.contact_id FROM contact_attributes a WHERE a.account_id = :'acct' AND a.slug = 'renewal' AND a.date_value IS NOT NULL AND a.date_value >= '2026-07-02T00:00:00Z') s2 ON s2.contact_id = s0.contact_id WHERE TRUE;
\echo @adapter_reset
SET LOCAL join_collapse_limit TO DEFAULT; SET LOCAL enable_nestloop TO DEFAULT; SET LOCAL enable_mergejoin TO DEFAULT; SET LOCAL work_mem TO DEFAULT;
\echo @adapter_commit
COMMIT;

-- A. Typed slots, the planner's choice.
\echo @slots
SELECT count(*) FROM contact_slots WHERE account_id = :'acct' AND lower(s1) = lower('pro') AND n1 > 500 AND d1 >= '2026-07-02T00:00:00Z';

-- The same two without parallel workers (2 cores shared with other work).
\echo @flat_serial_set
BEGIN; SET LOCAL max_parallel_workers_per_gather = 0;
\echo @flat_serial
SELECT count(*) FROM bench_flat WHERE lower(plan) = lower('pro') AND score > 500 AND renewal >= '2026-07-02T00:00:00Z';
\echo @flat_serial_commit
COMMIT;
\echo @slots_serial_set
BEGIN; SET LOCAL max_parallel_workers_per_gather = 0;
\echo @slots_serial
SELECT count(*) FROM contact_slots WHERE account_id = :'acct' AND lower(s1) = lower('pro') AND n1 > 500 AND d1 >= '2026-07-02T00:00:00Z';
\echo @slots_serial_commit
COMMIT;
