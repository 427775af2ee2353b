-- Two accounts: A has only announcement messages, T only transactional ones.
INSERT INTO accounts (id, name, created_at) VALUES
  ('aaaaaaaa-0000-0000-0000-000000000000', 'A', now()),
  ('bbbbbbbb-0000-0000-0000-000000000000', 'T', now());
INSERT INTO announcements (account_id, id, name, template_id, subject, include_unsubscribed, status, created_at, updated_at)
VALUES ('aaaaaaaa-0000-0000-0000-000000000000', 'aaaaaaaa-0000-0000-0000-00000000000a', 'x', gen_random_uuid(), 's', false, 'running', now(), now()),
       ('aaaaaaaa-0000-0000-0000-000000000000', 'aaaaaaaa-0000-0000-0000-00000000000b', 'y', gen_random_uuid(), 's', false, 'running', now(), now());
INSERT INTO contacts (account_id, id, email, created_at)
SELECT a, gen_random_uuid(), 'c' || i || '@example.test', now()
FROM unnest(ARRAY['aaaaaaaa-0000-0000-0000-000000000000', 'bbbbbbbb-0000-0000-0000-000000000000']::uuid[]) a,
     generate_series(1, 50000) i;
INSERT INTO messages (account_id, id, contact_id, email, template_id, kind, status, data, attempts,
  next_attempt_at, message_id_header, created_at, updated_at, announcement_id)
SELECT c.account_id, c.mid, c.id, c.email, gen_random_uuid(),
       CASE WHEN c.account_id = 'aaaaaaaa-0000-0000-0000-000000000000' THEN 'announcement' ELSE 'transactional' END,
       'queued', '{}', 0, now() - interval '1 day' + random() * interval '1 hour', '<' || c.mid || '@y>', now(), now(),
       CASE WHEN c.account_id = 'aaaaaaaa-0000-0000-0000-000000000000' THEN 'aaaaaaaa-0000-0000-0000-00000000000a'::uuid END
FROM (SELECT c.*, gen_random_uuid() AS mid FROM contacts c) c;
VACUUM ANALYZE;
