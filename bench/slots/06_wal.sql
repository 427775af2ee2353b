-- B. WAL bytes of one attribute write, counted exactly: each write runs four passes over
-- the same 1,000 contacts (a statement per contact, all in one transaction), and
-- pg_walinspect sums the WAL records of that transaction's xid between the passes' LSNs
-- (other sessions' records are left out). Pass 1 carries the full-page images of pages
-- first touched since the last checkpoint (fpi); passes 2-4 show the records alone.
-- Needs the pg_walinspect extension (contrib, PostgreSQL 15+), created here.
\set ON_ERROR_STOP on
CREATE EXTENSION IF NOT EXISTS pg_walinspect;
CHECKPOINT;
CREATE TEMP TABLE wal_sample AS
SELECT contact_id FROM contact_slots WHERE account_id = '01930000-0000-7000-8000-000000000001'
ORDER BY contact_id OFFSET (SELECT count(*) / 2 FROM contact_slots) LIMIT 1000;
CREATE TEMP TABLE wal_pass (write text, pass int, xid xid, start_lsn pg_lsn, end_lsn pg_lsn);
CREATE FUNCTION pg_temp.wal_of(label text, body text) RETURNS void LANGUAGE plpgsql AS $f$
DECLARE before pg_lsn; c uuid;
BEGIN
  FOR pass IN 1..4 LOOP
    before := pg_current_wal_insert_lsn();
    FOR c IN SELECT contact_id FROM wal_sample LOOP
      EXECUTE body USING c, clock_timestamp(), (random() * 1000)::float8;
    END LOOP;
    INSERT INTO wal_pass VALUES (label, pass, txid_current()::text::xid, before, pg_current_wal_insert_lsn());
  END LOOP;
END $f$;
SELECT pg_temp.wal_of('1 event date, EAV (record_event''s upsert)',
  $$INSERT INTO contact_attributes (account_id, contact_id, slug, date_value) VALUES ('01930000-0000-7000-8000-000000000001', $1, 'event.opened_email', $2) ON CONFLICT (account_id, contact_id, slug) DO UPDATE SET date_value = GREATEST(contact_attributes.date_value, excluded.date_value)$$);
SELECT pg_temp.wal_of('2 event date, slot d3',
  $$INSERT INTO contact_slots (account_id, contact_id, d3) VALUES ('01930000-0000-7000-8000-000000000001', $1, $2) ON CONFLICT (account_id, contact_id) DO UPDATE SET d3 = GREATEST(contact_slots.d3, excluded.d3)$$);
SELECT pg_temp.wal_of('3 score, EAV (set_attributes'' upsert)',
  $$INSERT INTO contact_attributes (account_id, contact_id, slug, string_value, number_value, bool_value, date_value) VALUES ('01930000-0000-7000-8000-000000000001', $1, 'score', NULL, $3, NULL, NULL) ON CONFLICT (account_id, contact_id, slug) DO UPDATE SET string_value = excluded.string_value, number_value = excluded.number_value, bool_value = excluded.bool_value, date_value = excluded.date_value$$);
SELECT pg_temp.wal_of('4 score, slot n1',
  $$UPDATE contact_slots SET n1 = $3 WHERE account_id = '01930000-0000-7000-8000-000000000001' AND contact_id = $1$$);
SELECT p.write, p.pass,
       round(sum(r.record_length - r.fpi_length) / 1000.0) AS record_bytes_per_write,
       round(sum(r.fpi_length) / 1000.0) AS fpi_bytes_per_write,
       count(*) FILTER (WHERE r.resource_manager = 'Btree') / 1000.0 AS btree_records_per_write
FROM wal_pass p
CROSS JOIN LATERAL pg_get_wal_records_info(p.start_lsn, p.end_lsn) r
WHERE r.xid = p.xid
GROUP BY p.write, p.pass ORDER BY p.write, p.pass;
