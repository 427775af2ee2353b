-- The bench's flat reference table from the current attribute rows: after 01_data.sql,
-- and again after writes (05, 06) to bring it back in step with contact_attributes.
\set ON_ERROR_STOP on
SET maintenance_work_mem = '512MB';
DROP TABLE IF EXISTS bench_flat;
-- As bench/src/audience.rs, build_flat_table.
CREATE TABLE bench_flat (
    id uuid PRIMARY KEY,
    plan text, score double precision, vip boolean, renewal timestamptz, city text,
    signed_up timestamptz, opened_email timestamptz, purchased timestamptz
);
INSERT INTO bench_flat
SELECT contact_id,
       max(string_value) FILTER (WHERE slug = 'plan'),
       max(number_value) FILTER (WHERE slug = 'score'),
       bool_or(bool_value) FILTER (WHERE slug = 'vip'),
       max(date_value) FILTER (WHERE slug = 'renewal'),
       max(string_value) FILTER (WHERE slug = 'city'),
       max(date_value) FILTER (WHERE slug = 'event.signed_up'),
       max(date_value) FILTER (WHERE slug = 'event.opened_email'),
       max(date_value) FILTER (WHERE slug = 'event.purchased')
FROM contact_attributes WHERE account_id = '01930000-0000-7000-8000-000000000001' GROUP BY contact_id;
CREATE INDEX ON bench_flat (lower(plan));
CREATE INDEX ON bench_flat (score);
CREATE INDEX ON bench_flat (vip);
CREATE INDEX ON bench_flat (renewal);
CREATE INDEX ON bench_flat (lower(city));
CREATE INDEX ON bench_flat (signed_up);
CREATE INDEX ON bench_flat (opened_email);
CREATE INDEX ON bench_flat (purchased);
VACUUM (ANALYZE) bench_flat;
