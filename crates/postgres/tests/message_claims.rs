//! A claim writes only the lease, columns no index of `messages` names, so its new row
//! versions are heap-only (HOT) where the page has room: a message in flight is stored as
//! `queued` with a lease and read as `sending` (migration 35, docs/operations.md "Delivery engine"). Before, the claim set `status = 'sending'`, and each claimed message cost a
//! new entry in every index of the table.

use diesel::{connection::SimpleConnection, sql_query, sql_types, QueryableByName, RunQueryDsl};
use mailroom_app::ports::{in_transaction, Lease};
use mailroom_domain::{
    message::{MessageFilter, MessageStatus},
    AccountId, Timestamp, Uuid,
};
use mailroom_postgres::PgDatabase;
use mailroom_test_support::{RowUpdates, TestDatabase};
use time::OffsetDateTime;

const ACCOUNT: &str = "0190a000-0000-7000-8000-00000000c1a1";
const MESSAGES: usize = 1000;
/// The worker's claim size.
const CLAIM: u32 = 128;

fn count(pool: &PgDatabase, account: AccountId, status: MessageStatus) -> u64 {
    let filter = MessageFilter {
        status: Some(status),
        ..MessageFilter::default()
    };
    in_transaction(pool, |tx| Ok(tx.count_messages(account, &filter)?)).expect("count")
}

#[test]
fn claims_are_heap_only_and_read_as_sending() {
    let database = TestDatabase::create();
    let mut conn = database.connection();
    // Rows the size of a transactional message with a little data, inserted as the API
    // does, one statement per message.
    conn.batch_execute(&format!(
        "INSERT INTO accounts (id, name, created_at) VALUES ('{ACCOUNT}', 'claims', now());
         DO $$ BEGIN FOR g IN 1..{MESSAGES} LOOP
           INSERT INTO messages (account_id, id, contact_id, email, template_id, kind, status,
                                 data, next_attempt_at, message_id_header, created_at,
                                 updated_at)
           SELECT '{ACCOUNT}', m.id, gen_random_uuid(),
                   'c' || g || '@example.org', gen_random_uuid(), 'transactional', 'queued',
                   jsonb_build_object('name', 'Contact ' || g, 'order', g,
                                      'note', repeat('n', 100)),
                   now() - interval '1 hour', '<' || m.id || '@example.org>', now(), now()
           FROM (SELECT gen_random_uuid() AS id) AS m;
         END LOOP; END $$;"
    ))
    .expect("messages");
    let account = AccountId::from_uuid(ACCOUNT.parse().expect("uuid"));
    let before = RowUpdates::of(&mut conn, "messages");

    // Claims of the worker's size until none is left, each on a connection of its own,
    // opened for it: a backend sends its statistics as soon as it goes idle only if it has
    // not sent any in the last second.
    let now = Timestamp::from_datetime(OffsetDateTime::now_utc());
    let lease = Lease {
        token: Uuid::from_u128(0x0190_a000_0000_7000_8000_0000_0000_c1a1),
        until: now.plus(time::Duration::minutes(1)),
    };
    let mut claimed = 0;
    let mut pool = None;
    loop {
        let fresh = database.pool_of_one();
        let taken = in_transaction(&fresh, |tx| {
            Ok(tx.claim_due_messages(account, now, &lease, CLAIM)?)
        })
        .expect("claim");
        if taken.is_empty() {
            pool = pool.or(Some(fresh));
            break;
        }
        assert!(taken
            .iter()
            .all(|claimed| claimed.message.status == MessageStatus::Queued
                && claimed.claims_without_outcome == 1));
        claimed += taken.len();
        pool = Some(fresh);
    }
    assert_eq!(claimed, MESSAGES);

    let after = before.after(&mut conn, "messages", MESSAGES as i64);
    let (updated, heap_only) = (
        after.updated - before.updated,
        after.heap_only - before.heap_only,
    );
    assert_eq!(updated, MESSAGES as i64, "one update per claimed message");
    println!("{heap_only} of {updated} claims heap-only");
    // The claim takes a page's rows together, in one statement, so the versions it replaces
    // cannot be pruned before it ends: a page holds a copy of each of its rows in the half
    // the table keeps free (fillfactor 50), except now and then its last row. Before
    // migration 35 none was HOT.
    assert!(
        heap_only * 10 >= updated * 8,
        "{heap_only} of {updated} claims heap-only"
    );

    // Stored as `queued` with a lease, read as `sending`, in the list's filter too.
    let pool = pool.expect("a pool");
    assert_eq!(
        count(&pool, account, MessageStatus::Sending),
        MESSAGES as u64
    );
    assert_eq!(count(&pool, account, MessageStatus::Queued), 0);
    let stored: Vec<StatusRow> = sql_query("SELECT DISTINCT status FROM messages")
        .load(&mut conn)
        .expect("stored statuses");
    assert_eq!(
        stored.into_iter().map(|row| row.status).collect::<Vec<_>>(),
        ["queued"]
    );
    // `sending` is not a stored status.
    assert!(conn
        .batch_execute("UPDATE messages SET status = 'sending'")
        .is_err());
}

#[derive(QueryableByName)]
struct StatusRow {
    #[diesel(sql_type = sql_types::Text)]
    status: String,
}
