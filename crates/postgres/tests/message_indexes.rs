//! The indexes of `messages` (migration 28, docs/operations.md "Delivery engine"): every
//! state change of a message writes an entry into each index whose predicate its new row
//! version matches, so the table keeps only indexes a query needs. This test lists them
//! and checks, on a filled table, that each API list and filter and each worker query is
//! planned on its index: dropping one a query needs, or adding one, fails here.

use diesel::{
    connection::SimpleConnection, sql_query, sql_types::Text, QueryableByName, RunQueryDsl,
};
use mailroom_test_support::TestDatabase;

const ACCOUNT: &str = "'0190a000-0000-7000-8000-000000000001'";
const CONTACT: &str = "'0190a000-0000-7000-8000-000000000002'";
const ANNOUNCEMENT: &str = "'0190a000-0000-7000-8000-000000000004'";

/// 20,000 messages of one account: transactional history (sent, failed, a few queued,
/// some with an idempotency key) and one announcement's messages (a tenth still queued).
const FILL: &str = "
INSERT INTO accounts (id, name, created_at) VALUES ('0190a000-0000-7000-8000-000000000001', 'a', now());
INSERT INTO contacts (account_id, id, email, created_at)
SELECT '0190a000-0000-7000-8000-000000000001',
       CASE WHEN g = 1 THEN '0190a000-0000-7000-8000-000000000002'::uuid ELSE gen_random_uuid() END,
       'c' || g || '@example.com', now()
FROM generate_series(1, 2000) AS g;
INSERT INTO announcements (account_id, id, name, template_id, subject, include_unsubscribed,
                           status, created_at, updated_at)
VALUES ('0190a000-0000-7000-8000-000000000001', '0190a000-0000-7000-8000-000000000004', 'n',
        '0190a000-0000-7000-8000-000000000003', 's', false, 'running', now(), now());
INSERT INTO messages (account_id, id, contact_id, email, template_id, kind, status,
                      next_attempt_at, message_id_header, created_at, updated_at, sent_at,
                      idempotency_key, request_hash)
SELECT c.account_id, gen_random_uuid(), c.id, c.email, '0190a000-0000-7000-8000-000000000003',
       'transactional',
       CASE WHEN g % 50 = 0 THEN 'queued' WHEN g % 10 = 0 THEN 'failed' ELSE 'sent' END,
       CASE WHEN g % 50 = 0 THEN now() - interval '1 second' END,
       '<' || g || '.' || c.email || '>', now() - g * interval '1 second', now(),
       CASE WHEN g % 10 <> 0 THEN now() END,
       CASE WHEN g % 7 = 0 THEN 'key-' || g || '-' || c.email END,
       CASE WHEN g % 7 = 0 THEN 'hash' END
FROM contacts c, generate_series(1, 9) AS g;
INSERT INTO messages (account_id, id, contact_id, email, template_id, kind, status,
                      next_attempt_at, message_id_header, created_at, updated_at, announcement_id)
SELECT c.account_id, gen_random_uuid(), c.id, c.email, '0190a000-0000-7000-8000-000000000003',
       'announcement', CASE WHEN c.email LIKE '%1@example.com' THEN 'queued' ELSE 'sent' END,
       CASE WHEN c.email LIKE '%1@example.com' THEN now() END,
       '<a.' || c.email || '>', now(), now(), '0190a000-0000-7000-8000-000000000004'
FROM contacts c;
ANALYZE;
SET enable_seqscan = off;
";

#[derive(QueryableByName)]
struct Line {
    #[diesel(sql_type = Text, column_name = "QUERY PLAN")]
    line: String,
}

#[derive(QueryableByName)]
struct Name {
    #[diesel(sql_type = Text)]
    name: String,
}

fn plan(conn: &mut diesel::PgConnection, query: &str) -> String {
    sql_query(format!("EXPLAIN (COSTS OFF) {query}"))
        .load::<Line>(conn)
        .unwrap_or_else(|error| panic!("EXPLAIN {query}: {error}"))
        .into_iter()
        .map(|row| row.line)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn messages_keeps_only_the_indexes_its_queries_use() {
    let database = TestDatabase::create();
    let mut conn = database.connection();
    let mut indexes: Vec<String> = sql_query(
        "SELECT indexname::text AS name FROM pg_indexes \
         WHERE schemaname = current_schema() AND tablename = 'messages' ORDER BY 1",
    )
    .load::<Name>(&mut conn)
    .expect("indexes")
    .into_iter()
    .map(|row| row.name)
    .collect();
    indexes.sort();
    assert_eq!(
        indexes,
        [
            "messages_account_due_idx",
            "messages_account_id_announcement_id_contact_id_key",
            "messages_account_id_idempotency_key_key",
            "messages_account_leased_idx",
            "messages_announcement_list_idx",
            "messages_announcement_pending_idx",
            "messages_contact_idx",
            "messages_list_idx",
            "messages_message_id_header_idx",
            "messages_pkey",
            "messages_recipient_idx",
            "messages_status_idx",
        ],
        "a new index on `messages` costs every claim and record an entry: name the query \
         it serves here and in docs/operations.md"
    );

    conn.batch_execute(FILL).expect("fill");
    let cases = [
        (
            "the log",
            format!("SELECT * FROM messages WHERE account_id = {ACCOUNT} ORDER BY created_at, id LIMIT 50"),
            "messages_list_idx",
        ),
        (
            "the log by status",
            format!("SELECT * FROM messages WHERE account_id = {ACCOUNT} AND status = 'failed' ORDER BY created_at, id LIMIT 50"),
            "messages_status_idx",
        ),
        (
            "the log by contact",
            format!("SELECT * FROM messages WHERE account_id = {ACCOUNT} AND contact_id = {CONTACT} ORDER BY created_at, id LIMIT 50"),
            "messages_contact_idx",
        ),
        (
            "the log by announcement",
            format!("SELECT * FROM messages WHERE account_id = {ACCOUNT} AND announcement_id = {ANNOUNCEMENT} ORDER BY created_at, id LIMIT 50"),
            "messages_announcement_list_idx",
        ),
        (
            "an idempotency key",
            format!("SELECT * FROM messages WHERE account_id = {ACCOUNT} AND idempotency_key = 'key-7-c1@example.com'"),
            "messages_account_id_idempotency_key_key",
        ),
        (
            "a Message-ID header (feedback)",
            format!("SELECT id FROM messages WHERE account_id = {ACCOUNT} AND message_id_header = '<1.c1@example.com>'"),
            "messages_message_id_header_idx",
        ),
        (
            "a recipient (feedback)",
            format!("SELECT id FROM messages WHERE account_id = {ACCOUNT} AND lower(email) = 'c1@example.com' ORDER BY created_at DESC, id DESC LIMIT 1"),
            "messages_recipient_idx",
        ),
        (
            "the claim",
            format!("SELECT id FROM messages WHERE account_id = {ACCOUNT} AND status IN ('queued', 'sending') AND next_attempt_at <= now() AND (locked_until IS NULL OR locked_until <= now()) ORDER BY next_attempt_at LIMIT 16 FOR UPDATE SKIP LOCKED"),
            "messages_account_due_idx",
        ),
        (
            "a lane's earliest lease",
            format!("SELECT min(locked_until) FROM messages WHERE lease_token IS NOT NULL AND account_id = {ACCOUNT} AND status = 'sending'"),
            "messages_account_leased_idx",
        ),
        (
            "an announcement's completion",
            format!("SELECT 1 FROM messages WHERE account_id = {ACCOUNT} AND announcement_id = {ANNOUNCEMENT} AND announcement_id IS NOT NULL AND status IN ('queued', 'sending') LIMIT 1"),
            "messages_announcement_pending_idx",
        ),
        (
            "the queue depth",
            "SELECT count(*) FROM messages WHERE status IN ('queued', 'sending')".to_owned(),
            "messages_account_due_idx",
        ),
    ];
    for (what, query, index) in cases {
        let plan = plan(&mut conn, &query);
        assert!(
            plan.contains(index),
            "{what} is not planned on {index}:\n{plan}"
        );
    }
    // The announcement batch's conflict target infers the partial unique index.
    let plan = plan(
        &mut conn,
        &format!(
            "INSERT INTO messages (account_id, id, contact_id, email, template_id, kind, status, \
             next_attempt_at, message_id_header, created_at, updated_at, announcement_id) \
             VALUES ({ACCOUNT}, gen_random_uuid(), {CONTACT}, 'c1@example.com', {CONTACT}, \
             'announcement', 'queued', now(), '<x>', now(), now(), {ANNOUNCEMENT}) \
             ON CONFLICT (account_id, announcement_id, contact_id) \
             WHERE announcement_id IS NOT NULL DO NOTHING"
        ),
    );
    assert!(
        plan.contains("messages_account_id_announcement_id_contact_id_key"),
        "{plan}"
    );
}
