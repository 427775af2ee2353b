//! The announcement counters' triggers (migration 25) against a real database: the
//! summed slots equal a recount after status changes made by several connections at once
//! (announcement and transactional messages in the same statements), first opens and
//! clicks, and deletes; and statements that change no count write no counter row.

use std::thread;

use diesel::{connection::SimpleConnection, pg::PgConnection, sql_query, sql_types, RunQueryDsl};
use mailroom_test_support::TestDatabase;

const ACCOUNT: &str = "0190a000-0000-7000-8000-000000000001";
const ANNOUNCEMENT: &str = "0190a000-0000-7000-8000-0000000000a1";
const OTHER_ANNOUNCEMENT: &str = "0190a000-0000-7000-8000-0000000000a2";

/// 400 contacts; 150 messages of each announcement and 100 transactional ones, queued.
const FILL: &str = "
INSERT INTO accounts (id, name, created_at) VALUES ('ACCOUNT', 'a', now());
INSERT INTO announcements (account_id, id, name, template_id, subject, include_unsubscribed,
                           status, created_at, updated_at)
SELECT 'ACCOUNT', a, 'x', gen_random_uuid(), 's', false, 'running', now(), now()
FROM unnest(ARRAY['ANNOUNCEMENT', 'OTHER_ANNOUNCEMENT']::uuid[]) AS a;
INSERT INTO contacts (account_id, id, email, created_at)
SELECT 'ACCOUNT', gen_random_uuid(), 'c' || g || '@example.org', now()
FROM generate_series(1, 400) AS g;
INSERT INTO messages (account_id, id, contact_id, email, template_id, kind, status,
                      next_attempt_at, message_id_header, created_at, updated_at,
                      announcement_id)
SELECT c.account_id, c.mid, c.id, c.email, gen_random_uuid(),
       CASE WHEN c.n <= 300 THEN 'announcement' ELSE 'transactional' END, 'queued', now(),
       '<' || c.mid || '@x>', now(), now(),
       CASE WHEN c.n <= 150 THEN 'ANNOUNCEMENT'::uuid
            WHEN c.n <= 300 THEN 'OTHER_ANNOUNCEMENT'::uuid END
FROM (SELECT account_id, id, email, row_number() OVER (ORDER BY id) AS n,
             gen_random_uuid() AS mid FROM contacts) AS c;
";

fn fill(conn: &mut PgConnection) {
    let sql = FILL
        .replace("OTHER_ANNOUNCEMENT", OTHER_ANNOUNCEMENT)
        .replace("ANNOUNCEMENT", ANNOUNCEMENT)
        .replace("ACCOUNT", ACCOUNT);
    conn.batch_execute(&sql).expect("fill");
}

#[derive(diesel::QueryableByName)]
struct Differing {
    #[diesel(sql_type = sql_types::BigInt)]
    differing: i64,
}

/// How many announcements' summed counters differ from a recount of their messages
/// (statuses, and opens and clicks when `engagement`).
fn differing(conn: &mut PgConnection, engagement: bool) -> i64 {
    let (summed, counted) = if engagement {
        (
            ", sum(opened), sum(clicked)",
            ", count(t.opened_at), count(t.clicked_at)",
        )
    } else {
        ("", "")
    };
    // Compared both ways: counters without messages, or messages without counters,
    // differ too.
    let sql = format!(
        "WITH summed AS (
             SELECT announcement_id, sum(queued) AS q, sum(sending) AS s, sum(sent) AS st,
                    sum(failed) AS f, sum(bounced) AS b, sum(skipped) AS k {summed}
             FROM announcement_counters GROUP BY 1),
         counted AS (
             SELECT m.announcement_id,
                    count(*) FILTER (WHERE message_state(m.status, m.lease_token) = 'queued'),
                    count(*) FILTER (WHERE message_state(m.status, m.lease_token) = 'sending'),
                    count(*) FILTER (WHERE message_state(m.status, m.lease_token) = 'sent'),
                    count(*) FILTER (WHERE message_state(m.status, m.lease_token) = 'failed'),
                    count(*) FILTER (WHERE message_state(m.status, m.lease_token) = 'bounced'),
                    count(*) FILTER (WHERE message_state(m.status, m.lease_token) = 'skipped') {counted}
             FROM messages m
             LEFT JOIN message_tracking t ON t.account_id = m.account_id AND t.message_id = m.id
             WHERE m.announcement_id IS NOT NULL GROUP BY 1)
         SELECT count(*) AS differing FROM (
             (SELECT * FROM summed EXCEPT SELECT * FROM counted)
             UNION ALL
             (SELECT * FROM counted EXCEPT SELECT * FROM summed)) AS d"
    );
    sql_query(sql)
        .get_result::<Differing>(conn)
        .expect("compare")
        .differing
}

#[derive(diesel::QueryableByName, PartialEq, Debug)]
struct Versions {
    #[diesel(sql_type = sql_types::Text)]
    versions: String,
}

/// The counter rows' row versions: unchanged when no statement wrote to them.
fn versions(conn: &mut PgConnection) -> Versions {
    sql_query(
        "SELECT coalesce(string_agg(ctid::text || '/' || xmin::text, ',' ORDER BY ctid), '') \
         AS versions FROM announcement_counters",
    )
    .get_result(conn)
    .expect("versions")
}

#[test]
fn counters_match_a_recount_after_concurrent_settles_engagement_and_deletes() {
    let db = TestDatabase::create();
    let mut conn = db.connection();
    fill(&mut conn);
    assert_eq!(differing(&mut conn, true), 0, "after the expansion");

    // Four workers claim and settle at once, each statement mixing both announcements'
    // messages with transactional ones, as the delivery engine's claims of one account do.
    let workers: Vec<_> = (0..4)
        .map(|worker| {
            let url = db.url().to_owned();
            thread::spawn(move || {
                let mut conn =
                    <PgConnection as diesel::Connection>::establish(&url).expect("connect");
                for round in 0..6 {
                    let token = format!("0190a000-0000-7000-8000-{worker:06}{round:06}");
                    conn.batch_execute(&format!(
                        "UPDATE messages AS m SET lease_token = '{token}', \
                             locked_until = now() + interval '1 minute' \
                         FROM (SELECT account_id, id FROM messages \
                               WHERE status = 'queued' AND lease_token IS NULL \
                               ORDER BY id LIMIT 15 \
                               FOR UPDATE SKIP LOCKED) AS due \
                         WHERE m.account_id = due.account_id AND m.id = due.id;
                         UPDATE messages SET locked_until = now() + interval '2 minutes' \
                         WHERE lease_token = '{token}';
                         UPDATE messages SET \
                             status = (ARRAY['sent', 'failed', 'bounced', 'queued']) \
                                      [1 + abs(hashtext(id::text)) % 4], \
                             next_attempt_at = CASE WHEN abs(hashtext(id::text)) % 4 = 3 \
                                                    THEN now() END, \
                             lease_token = NULL, locked_until = NULL \
                         WHERE lease_token = '{token}';"
                    ))
                    .expect("claim, renew and settle");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker");
    }
    assert_eq!(
        differing(&mut conn, true),
        0,
        "after the concurrent settles"
    );

    // A lease renewal of announcement messages and any update of transactional ones
    // change no count and write no counter row.
    let before = versions(&mut conn);
    conn.batch_execute(
        "UPDATE messages SET updated_at = now() WHERE announcement_id IS NOT NULL;
         UPDATE messages SET status = 'skipped', skip_reason = 'unsubscribed', \
             next_attempt_at = NULL WHERE announcement_id IS NULL AND status = 'queued';",
    )
    .expect("updates that change no count");
    assert_eq!(versions(&mut conn), before);

    // First opens, a gained click, and a repeated click that gains nothing.
    conn.batch_execute(
        "INSERT INTO message_tracking (account_id, message_id, opened_at)
         SELECT account_id, id, now() FROM messages WHERE status = 'sent' ORDER BY id LIMIT 20;
         INSERT INTO message_tracking (account_id, message_id, clicked_at)
         SELECT account_id, id, now() FROM messages WHERE status IN ('sent', 'failed')
         ORDER BY id LIMIT 30
         ON CONFLICT (account_id, message_id) DO UPDATE SET clicked_at = EXCLUDED.clicked_at
         WHERE message_tracking.clicked_at IS NULL;
         INSERT INTO message_tracking (account_id, message_id, clicked_at)
         SELECT account_id, id, now() FROM messages WHERE status IN ('sent', 'failed')
         ORDER BY id LIMIT 30
         ON CONFLICT (account_id, message_id) DO UPDATE SET clicked_at = EXCLUDED.clicked_at
         WHERE message_tracking.clicked_at IS NULL;",
    )
    .expect("tracking");
    assert_eq!(differing(&mut conn, true), 0, "after opens and clicks");

    // Deletes of every status; a deleted message's opens and clicks stay counted, so
    // only statuses are compared from here.
    conn.batch_execute(
        "DELETE FROM messages WHERE id IN (SELECT id FROM messages ORDER BY id DESC LIMIT 60);
         DELETE FROM messages WHERE id IN
             (SELECT id FROM messages WHERE status <> 'queued' ORDER BY id LIMIT 10);",
    )
    .expect("deletes");
    assert_eq!(differing(&mut conn, false), 0, "after deletes");

    // An announcement that goes takes its counters with it; deleting its messages then
    // writes none back.
    conn.batch_execute(&format!(
        "BEGIN;
         DELETE FROM announcements WHERE id = '{OTHER_ANNOUNCEMENT}';
         DELETE FROM messages WHERE announcement_id = '{OTHER_ANNOUNCEMENT}';
         COMMIT;"
    ))
    .expect("announcement deleted");
    assert_eq!(
        differing(&mut conn, false),
        0,
        "after the announcement went"
    );
}
