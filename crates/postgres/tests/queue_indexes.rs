//! The indexes of the two queue tables, `messages` (migration 28) and `webhook_events`
//! (migration 30; docs/operations.md "Delivery engine"): every state change of a row
//! writes an entry into each index whose predicate its new row version matches, so the
//! tables keep only indexes a query needs. These tests list them and check, on a filled
//! table, that each API list and filter and each worker query is planned on its index:
//! dropping one a query needs, or adding one, fails here. The worker's claims must read
//! one account's rows (the lanes): a claim that walked every account's due rows would
//! step over the rows of each account it skips.

use diesel::{
    connection::SimpleConnection, sql_query, sql_types::Text, QueryableByName, RunQueryDsl,
};
use mailroom_app::ports::in_transaction;
use mailroom_domain::{
    webhook::{WebhookAuthType, WebhookEventType},
    webhook_event::{WebhookEvent, WebhookTarget},
    AccountId, Timestamp, Uuid, WebhookEventId,
};
use mailroom_test_support::TestDatabase;

const ACCOUNT: &str = "'0190a000-0000-7000-8000-000000000001'";
const CONTACT: &str = "'0190a000-0000-7000-8000-000000000002'";
const ANNOUNCEMENT: &str = "'0190a000-0000-7000-8000-000000000004'";
const OTHER_ACCOUNT: &str = "'0190a000-0000-7000-8000-000000000009'";

/// 20,000 messages of one account: transactional history (sent, failed, a few queued,
/// some with an idempotency key) and one announcement's messages of another template (a
/// tenth still queued).
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
SELECT c.account_id, c.mid, c.id, c.email, '0190a000-0000-7000-8000-000000000003',
       'transactional',
       CASE WHEN g % 50 = 0 THEN 'queued' WHEN g % 10 = 0 THEN 'failed' ELSE 'sent' END,
       CASE WHEN g % 50 = 0 THEN now() - interval '1 second' END,
       '<' || c.mid || '@example.com>', now() - g * interval '1 second', now(),
       CASE WHEN g % 10 <> 0 THEN now() END,
       CASE WHEN g % 7 = 0 THEN 'key-' || g || '-' || c.email END,
       CASE WHEN g % 7 = 0 THEN 'hash' END
FROM (SELECT c.*, g, gen_random_uuid() AS mid FROM contacts c, generate_series(1, 9) AS g) AS c;
INSERT INTO messages (account_id, id, contact_id, email, template_id, kind, status,
                      next_attempt_at, message_id_header, created_at, updated_at, announcement_id)
SELECT c.account_id, c.mid, c.id, c.email, '0190a000-0000-7000-8000-000000000005',
       'announcement', CASE WHEN c.email LIKE '%1@example.com' THEN 'queued' ELSE 'sent' END,
       CASE WHEN c.email LIKE '%1@example.com' THEN now() END,
       '<' || c.mid || '@example.com>', now(), now(), '0190a000-0000-7000-8000-000000000004'
FROM (SELECT c.*, gen_random_uuid() AS mid FROM contacts c) AS c;
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

fn indexes_of(conn: &mut diesel::PgConnection, table: &str) -> Vec<String> {
    let mut indexes: Vec<String> = sql_query(format!(
        "SELECT indexname::text AS name FROM pg_indexes \
         WHERE schemaname = current_schema() AND tablename = '{table}' ORDER BY 1"
    ))
    .load::<Name>(conn)
    .expect("indexes")
    .into_iter()
    .map(|row| row.name)
    .collect();
    indexes.sort();
    indexes
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
    assert_eq!(
        indexes_of(&mut conn, "messages"),
        [
            "messages_account_due_idx",
            "messages_account_id_announcement_id_contact_id_key",
            "messages_account_id_idempotency_key_key",
            "messages_announcement_held_idx",
            "messages_announcement_list_idx",
            "messages_announcement_pending_idx",
            "messages_contact_idx",
            "messages_list_idx",
            "messages_pkey",
            "messages_recipient_idx",
            "messages_status_idx",
            "messages_template_list_idx",
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
            // `sent`, most of a log, has no entry in `messages_status_idx` (migration 36):
            // the log's own index finds its pages.
            "the log by status `sent`",
            format!("SELECT * FROM messages WHERE account_id = {ACCOUNT} AND status = 'sent' ORDER BY created_at, id LIMIT 50"),
            "messages_list_idx",
        ),
        (
            "the log by status `queued` (pending or held, not leased)",
            format!("SELECT * FROM messages WHERE account_id = {ACCOUNT} AND status IN ('queued', 'held') AND lease_token IS NULL ORDER BY created_at, id LIMIT 50"),
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
            // The announcement's template: a tenth of the log.
            "the log by template, newest first",
            format!("SELECT * FROM messages WHERE account_id = {ACCOUNT} AND template_id = '0190a000-0000-7000-8000-000000000005' ORDER BY created_at DESC, id DESC LIMIT 50"),
            "messages_template_list_idx",
        ),
        (
            "the log by address, newest first",
            format!("SELECT * FROM messages WHERE account_id = {ACCOUNT} AND lower(email) = 'c1@example.com' ORDER BY created_at DESC, id DESC LIMIT 50"),
            "messages_recipient_idx",
        ),
        (
            "an idempotency key",
            format!("SELECT * FROM messages WHERE account_id = {ACCOUNT} AND idempotency_key = 'key-7-c1@example.com'"),
            "messages_account_id_idempotency_key_key",
        ),
        (
            "a recipient (feedback)",
            format!("SELECT id FROM messages WHERE account_id = {ACCOUNT} AND lower(email) = 'c1@example.com' ORDER BY created_at DESC, id DESC LIMIT 1"),
            "messages_recipient_idx",
        ),
        (
            "the claim",
            format!("SELECT id FROM messages WHERE account_id = {ACCOUNT} AND status = 'queued' AND next_attempt_at <= now() AND (locked_until IS NULL OR locked_until <= now()) ORDER BY next_attempt_at LIMIT 16 FOR UPDATE SKIP LOCKED"),
            "messages_account_due_idx",
        ),
        (
            "a lane's earliest lease",
            format!("SELECT min(locked_until) FROM messages WHERE account_id = {ACCOUNT} AND status = 'queued' AND next_attempt_at <= now() AND lease_token IS NOT NULL"),
            "messages_account_due_idx",
        ),
        (
            "an announcement's completion",
            format!("SELECT 1 FROM messages WHERE account_id = {ACCOUNT} AND announcement_id = {ANNOUNCEMENT} AND announcement_id IS NOT NULL AND status = 'queued' LIMIT 1"),
            "messages_announcement_pending_idx",
        ),
        (
            "a paused announcement's held messages (resume, cancel)",
            format!("SELECT id FROM messages WHERE account_id = {ACCOUNT} AND announcement_id = {ANNOUNCEMENT} AND status = 'held'"),
            "messages_announcement_held_idx",
        ),
        (
            "the queue depth",
            "SELECT count(*) FROM messages WHERE status = 'queued'".to_owned(),
            "messages_account_due_idx",
        ),
    ];
    assert_planned_on(&mut conn, &cases);
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

/// Feedback finds a message by the id its `Message-ID` embeds (migration 36 dropped the
/// header's index), so the table refuses a header that does not name the row's id.
#[test]
fn a_message_id_header_must_name_its_message() {
    let database = TestDatabase::create();
    let mut conn = database.connection();
    conn.batch_execute(FILL).expect("fill");
    let insert = |header: &str| {
        format!(
            "INSERT INTO messages (account_id, id, contact_id, email, template_id, kind, status, \
             next_attempt_at, message_id_header, created_at, updated_at) \
             VALUES ({ACCOUNT}, '0190a000-0000-7000-8000-0000000000aa', {CONTACT}, \
             'c1@example.com', {CONTACT}, 'transactional', 'queued', now(), '{header}', now(), now())"
        )
    };
    for header in [
        "<0190a000-0000-7000-8000-0000000000ab@example.com>",
        "<1.c1@example.com>",
        "0190a000-0000-7000-8000-0000000000aa@example.com>",
    ] {
        let error = conn
            .batch_execute(&insert(header))
            .expect_err("a header without the row's id");
        assert!(
            error
                .to_string()
                .contains("messages_message_id_header_names_id"),
            "{header}: {error}"
        );
    }
    conn.batch_execute(&insert(
        "<0190a000-0000-7000-8000-0000000000aa@example.com>",
    ))
    .expect("the header naming the row's id");
}

fn assert_planned_on(conn: &mut diesel::PgConnection, cases: &[(&str, String, &str)]) {
    for (what, query, index) in cases {
        let plan = plan(conn, query);
        assert!(
            plan.contains(index),
            "{what} is not planned on {index}:\n{plan}"
        );
    }
}

/// 20,000 webhook events of one account, a twentieth pending (half of those leased), and
/// the same for a second account.
const WEBHOOK_FILL: &str = "
INSERT INTO accounts (id, name, created_at)
VALUES ('0190a000-0000-7000-8000-000000000001', 'a', now()),
       ('0190a000-0000-7000-8000-000000000009', 'b', now());
INSERT INTO webhook_events (account_id, id, event_type, status, payload, target, occurred_at,
                            next_attempt_at, locked_until, lease_token, created_at, delivered_at)
SELECT a.id, gen_random_uuid(), 'contact.deleted',
       CASE WHEN g % 20 = 0 THEN 'retrying' ELSE 'delivered' END, '{}', '{}', now(),
       CASE WHEN g % 20 = 0 THEN now() - g * interval '1 second' END,
       CASE WHEN g % 40 = 0 THEN now() + interval '1 minute' END,
       CASE WHEN g % 40 = 0 THEN gen_random_uuid() END,
       now() - g * interval '1 second',
       CASE WHEN g % 20 <> 0 THEN now() END
FROM accounts a, generate_series(1, 20000) AS g;
ANALYZE;
SET enable_seqscan = off;
";

#[test]
fn webhook_events_are_claimed_per_account_on_their_own_indexes() {
    let database = TestDatabase::create();
    let mut conn = database.connection();
    assert_eq!(
        indexes_of(&mut conn, "webhook_events"),
        [
            "webhook_events_account_due_idx",
            "webhook_events_account_leased_idx",
            "webhook_events_list_idx",
            "webhook_events_pkey",
            "webhook_events_status_idx",
        ],
        "a new index on `webhook_events` costs every claim and record an entry: name the \
         query it serves here and in docs/operations.md"
    );
    conn.batch_execute(WEBHOOK_FILL).expect("fill");
    let cases = [
        (
            "the claim",
            format!("SELECT account_id, id FROM webhook_events WHERE account_id = {ACCOUNT} AND status IN ('queued', 'retrying') AND next_attempt_at <= now() AND (locked_until IS NULL OR locked_until <= now()) ORDER BY next_attempt_at LIMIT 64 FOR UPDATE SKIP LOCKED"),
            "webhook_events_account_due_idx",
        ),
        (
            "a lane's earliest lease",
            format!("SELECT min(locked_until) FROM webhook_events WHERE lease_token IS NOT NULL AND account_id = {ACCOUNT} AND status IN ('queued', 'retrying')"),
            "webhook_events_account_leased_idx",
        ),
        (
            "the log",
            format!("SELECT * FROM webhook_events WHERE account_id = {ACCOUNT} ORDER BY created_at, id LIMIT 50"),
            "webhook_events_list_idx",
        ),
        (
            "the log by status",
            format!("SELECT * FROM webhook_events WHERE account_id = {ACCOUNT} AND status = 'retrying' ORDER BY created_at, id LIMIT 50"),
            "webhook_events_status_idx",
        ),
        (
            "a paused announcement's held messages (resume, cancel)",
            format!("SELECT id FROM messages WHERE account_id = {ACCOUNT} AND announcement_id = {ANNOUNCEMENT} AND status = 'held'"),
            "messages_announcement_held_idx",
        ),
        (
            "the queue depth",
            "SELECT count(*) FROM webhook_events WHERE status IN ('queued', 'retrying')".to_owned(),
            "webhook_events_account_due_idx",
        ),
    ];
    assert_planned_on(&mut conn, &cases);
    // Events queued through the repository bring their lanes forward: one per account,
    // due at its earliest pending event (the fill above wrote none: it is SQL by hand).
    let pool = database.pool_of_one();
    let at = |seconds: i64| {
        Timestamp::parse("2026-03-01T12:00:00Z")
            .expect("timestamp")
            .plus(time::Duration::seconds(seconds))
    };
    for (account, earliest) in [(ACCOUNT, -60), (OTHER_ACCOUNT, -30)] {
        let account = AccountId::from_uuid(account.trim_matches('\'').parse().expect("uuid"));
        for due in [0, earliest] {
            let mut event = WebhookEvent::queued(
                WebhookEventId::from_uuid(Uuid::now_v7()),
                account,
                WebhookEventType::ContactDeleted,
                serde_json::json!({}),
                WebhookTarget {
                    url: "http://127.0.0.1:9/hooks".into(),
                    auth_type: WebhookAuthType::None,
                    signing_secret_suffix: "abcd".into(),
                    username: None,
                    password_or_token_suffix: None,
                },
                at(0),
                at(0),
            );
            event.next_attempt_at = Some(at(due));
            in_transaction(&pool, |tx| Ok(tx.insert_webhook_event(&event)?)).expect("event");
        }
    }
    let lanes: Vec<Name> = sql_query(
        "SELECT account_id::text || ' ' || to_char(next_due_at AT TIME ZONE 'UTC', 'HH24:MI:SS') \
         AS name FROM webhook_lanes WHERE next_due_at IS NOT NULL ORDER BY 1",
    )
    .load(&mut conn)
    .expect("lanes");
    assert_eq!(
        lanes.into_iter().map(|lane| lane.name).collect::<Vec<_>>(),
        [
            "0190a000-0000-7000-8000-000000000001 11:59:00",
            "0190a000-0000-7000-8000-000000000009 11:59:30",
        ],
        "one lane per account with pending events, due at the earliest"
    );
}
