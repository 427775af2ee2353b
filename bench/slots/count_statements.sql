-- The bench's count (plan s_equal 'pro' AND score greater_than 500 AND renewal after
-- 2026-07-01) in each layout, one labelled block each. 04_time.sh repeats the blocks,
-- interleaved, and reads psql's \timing of every statement after a label.
-- :acct is the account id (01_data.sql's).

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

-- A. Typed slots: one statement, the planner's choice (a bitmap scan of the most
-- selective slot index, the other conditions checked on the slot row).
\echo @slots
SELECT count(*) FROM contact_slots WHERE account_id = :'acct' AND lower(s1) = lower('pro') AND n1 > 500 AND d1 >= '2026-07-02T00:00:00Z';

-- C1. The adapter's count statement on contact_attributes partitioned by slug, under the
-- same SET LOCALs (the sizing statement left out: it reads 5,000 entries per condition).
\echo @part_set
BEGIN; SET LOCAL join_collapse_limit = 1; SET LOCAL enable_nestloop = off; SET LOCAL enable_mergejoin = off; SET LOCAL work_mem = '32MB';
\echo @part_count
SELECT count(*) AS count FROM (SELECT a.contact_id FROM contact_attributes_p a WHERE a.account_id = :'acct' AND a.slug = 'plan' AND a.string_value IS NOT NULL AND lower(a.string_value) = lower('pro')) s0 JOIN (SELECT a.contact_id FROM contact_attributes_p a WHERE a.account_id = :'acct' AND a.slug = 'score' AND a.number_value IS NOT NULL AND a.number_value > 500) s1 ON s1.contact_id = s0.contact_id JOIN (SELECT a.contact_id FROM contact_attributes_p a WHERE a.account_id = :'acct' AND a.slug = 'renewal' AND a.date_value IS NOT NULL AND a.date_value >= '2026-07-02T00:00:00Z') s2 ON s2.contact_id = s0.contact_id WHERE TRUE;
\echo @part_commit
COMMIT;

-- C2. Every set in contact order from contact_attributes_by_contact_idx (value filtered
-- from the INCLUDE columns), met by merge joins: no hash tables, and consecutive entries
-- visit consecutive heap pages. JIT off: the planner's cost passes jit_above_cost.
\echo @merge_set
BEGIN; SET LOCAL join_collapse_limit = 1; SET LOCAL enable_hashjoin = off; SET LOCAL enable_nestloop = off; SET LOCAL enable_sort = off; SET LOCAL max_parallel_workers_per_gather = 0; SET LOCAL jit = off;
\echo @merge_count
SELECT count(*) AS count FROM (SELECT a.contact_id FROM contact_attributes a WHERE a.account_id = :'acct' AND a.slug = 'plan' AND lower(a.string_value) = lower('pro')) s0 JOIN (SELECT a.contact_id FROM contact_attributes a WHERE a.account_id = :'acct' AND a.slug = 'score' AND a.number_value > 500) s1 ON s1.contact_id = s0.contact_id JOIN (SELECT a.contact_id FROM contact_attributes a WHERE a.account_id = :'acct' AND a.slug = 'renewal' AND a.date_value >= '2026-07-02T00:00:00Z') s2 ON s2.contact_id = s0.contact_id WHERE TRUE;
\echo @merge_commit
COMMIT;
