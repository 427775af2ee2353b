-- The audience of `cargo xtask bench audience` (bench/src/data.rs), written by SQL into a
-- migrated database: :contacts contacts (default 1,000,000) of one account with the same
-- five attributes and distributions (plan uniform over 5 values, score 0..1000, vip 10 %,
-- renewal a random second of 2026, city one of 50), the same heap order as the API import
-- (UUIDv7-like ids in generation order; contacts written per 1,000-row batch in email
-- order, attribute rows in (contact, slug) order), then the bench's bulk events (3 per
-- contact, their event.* date attributes); 01b_flat.sql then builds its flat reference.
-- Values come from random() with a fixed seed, not the bench's SplitMix64, so the
-- matching set is the same size (about 50,000), not the same contacts.
\set ON_ERROR_STOP on
\if :{?contacts}
\else
  \set contacts 1000000
\endif
SET synchronous_commit = off;
-- Bulk rows that reference existing rows by construction: skip the FK triggers, as the
-- bench's record_events_in_bulk does.
SET session_replication_role = replica;
SET maintenance_work_mem = '512MB';
SET work_mem = '256MB';

INSERT INTO accounts (id, name, created_at)
VALUES ('01930000-0000-7000-8000-000000000001', 'Bench', now());
INSERT INTO users (id, email, created_at)
VALUES ('01930000-0000-7000-8000-000000000002', 'bench@bench.example', now());
INSERT INTO memberships (account_id, user_id, role, created_at)
VALUES ('01930000-0000-7000-8000-000000000001', '01930000-0000-7000-8000-000000000002', 'owner', now());

SELECT setseed(0.16);
CREATE UNLOGGED TABLE slots_gen AS
SELECT i,
       -- UUIDv7 layout, strictly increasing with i: 48-bit ms, version 7, 12-bit counter.
       (lpad(to_hex(1764000000000 + i / 4096), 12, '0') || '7'
        || lpad(to_hex(i % 4096), 3, '0') || '8' || substr(md5(i::text), 1, 15))::uuid AS id,
       'user' || i || '@bench.example' AS email,
       (ARRAY['free', 'starter', 'pro', 'team', 'enterprise'])[1 + floor(random() * 5)::int] AS plan,
       floor(random() * 1001)::float8 AS score,
       random() < 0.1 AS vip,
       timestamptz '2026-01-01 00:00:00+00' + floor(random() * 365 * 86400) * interval '1 second' AS renewal,
       (ARRAY['Amsterdam','Athens','Auckland','Austin','Bangkok','Barcelona','Berlin','Bogota',
              'Boston','Brussels','Budapest','Buenos Aires','Cairo','Cape Town','Chicago',
              'Copenhagen','Dakar','Delhi','Denver','Dublin','Edinburgh','Helsinki','Hong Kong',
              'Istanbul','Jakarta','Kyiv','Lagos','Lima','Lisbon','London','Los Angeles','Madrid',
              'Manila','Melbourne','Mexico City','Milan','Montreal','Mumbai','Nairobi','Oslo',
              'Paris','Prague','Rome','Santiago','Seoul','Singapore','Stockholm','Tokyo',
              'Toronto','Vienna'])[1 + floor(random() * 50)::int] AS city
FROM generate_series(0, :contacts - 1) AS i;

INSERT INTO contacts (account_id, id, email, created_at)
SELECT '01930000-0000-7000-8000-000000000001', id, email, now()
FROM slots_gen ORDER BY i / 1000, email;

INSERT INTO contact_attributes (account_id, contact_id, slug, string_value, number_value, bool_value, date_value)
SELECT '01930000-0000-7000-8000-000000000001', g.id, v.slug, v.s, v.n, v.b, v.d
FROM slots_gen g
CROSS JOIN LATERAL (VALUES
  ('city', g.city, NULL::float8, NULL::boolean, NULL::timestamptz),
  ('plan', g.plan, NULL, NULL, NULL),
  ('renewal', NULL, NULL, NULL, g.renewal),
  ('score', NULL, g.score, NULL, NULL),
  ('vip', NULL, NULL, g.vip, NULL)) AS v(slug, s, n, b, d)
ORDER BY g.i, v.slug;

INSERT INTO attribute_metas (account_id, slug, attribute_type, source, created_at)
VALUES ('01930000-0000-7000-8000-000000000001', 'plan', 'string', 'custom', now()),
       ('01930000-0000-7000-8000-000000000001', 'score', 'number', 'custom', now()),
       ('01930000-0000-7000-8000-000000000001', 'vip', 'boolean', 'custom', now()),
       ('01930000-0000-7000-8000-000000000001', 'renewal', 'date', 'custom', now()),
       ('01930000-0000-7000-8000-000000000001', 'city', 'string', 'custom', now()),
       ('01930000-0000-7000-8000-000000000001', 'event.signed_up', 'date', 'event', now()),
       ('01930000-0000-7000-8000-000000000001', 'event.opened_email', 'date', 'event', now()),
       ('01930000-0000-7000-8000-000000000001', 'event.purchased', 'date', 'event', now());
DROP TABLE slots_gen;

-- The bench's bulk events (bench/src/audience.rs, record_events_in_bulk).
INSERT INTO contact_events (account_id, id, contact_id, slug, occurred_at)
SELECT c.account_id, gen_random_uuid(), c.id, s.slug,
       timestamptz '2026-01-01 00:00:00+00' + random() * interval '330 days'
FROM contacts c CROSS JOIN (VALUES ('signed_up'), ('opened_email'), ('purchased')) AS s(slug)
WHERE c.account_id = '01930000-0000-7000-8000-000000000001';
INSERT INTO contact_attributes (account_id, contact_id, slug, date_value)
SELECT account_id, contact_id, 'event.' || slug, max(occurred_at) FROM contact_events
WHERE account_id = '01930000-0000-7000-8000-000000000001' GROUP BY account_id, contact_id, slug
ON CONFLICT (account_id, contact_id, slug) DO UPDATE SET date_value = excluded.date_value;
INSERT INTO contact_event_totals (account_id, slug, count, last_seen)
SELECT account_id, slug, count(*), max(occurred_at) FROM contact_events
WHERE account_id = '01930000-0000-7000-8000-000000000001' GROUP BY account_id, slug;

RESET session_replication_role;
