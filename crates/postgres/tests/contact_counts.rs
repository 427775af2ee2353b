//! Counting delivered messages to their contacts is a heap-only (HOT) update: no index of
//! `contacts` holds `message_count` and the table keeps room on its pages for the new
//! versions (migration 34, docs/performance.md "Design choices, measured"). A
//! non-HOT update wrote a new entry into each of the table's indexes, the email filter's
//! two GIN indexes among them, for every delivered message. Each page keeps half its
//! room free (migration 37, "Contacts with room for their first count"), so a record
//! batch that counts many rows of one page, as an announcement's do, is heap-only too.
//! The latest-sent time it moves beside the count carries no index either.

use diesel::{
    connection::SimpleConnection, sql_query, sql_types, PgConnection, QueryableByName, RunQueryDsl,
};
use mailroom_app::ports::{in_transaction, DeliveredTo};
use mailroom_domain::{AccountId, ContactId, Timestamp, Uuid};
use mailroom_test_support::{RowUpdates, TestDatabase};

const ACCOUNT: &str = "0190a000-0000-7000-8000-00000000c0c0";
const CONTACTS: i64 = 2000;

/// When the counted messages were sent: the latest-sent time the count also moves.
fn sent_at() -> Timestamp {
    Timestamp::parse("2026-11-30T12:00:00Z").expect("timestamp")
}

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = sql_types::Uuid)]
    id: Uuid,
}

#[derive(QueryableByName)]
struct CountRow {
    #[diesel(sql_type = sql_types::Integer)]
    message_count: i32,
}

/// A database with `CONTACTS` contacts of one account, stored in the order of their
/// numbers, and a connection to it.
fn filled() -> (TestDatabase, PgConnection, AccountId) {
    let database = TestDatabase::create();
    let mut conn = database.connection();
    conn.batch_execute(&format!(
        "INSERT INTO accounts (id, name, created_at) VALUES ('{ACCOUNT}', 'counts', now());
         INSERT INTO contacts (account_id, id, email, created_at)
           SELECT '{ACCOUNT}', gen_random_uuid(), 'c' || g || '@example.org', now()
           FROM generate_series(1, {CONTACTS}) g;"
    ))
    .expect("contacts");
    let account = AccountId::from_uuid(ACCOUNT.parse().expect("uuid"));
    (database, conn, account)
}

/// The contacts `query` selects (by `id`), each to be counted once, as a record batch
/// gives them to `count_messages_to_contacts`.
fn counted_once(conn: &mut PgConnection, account: AccountId, query: &str) -> Vec<DeliveredTo> {
    sql_query(query)
        .load::<IdRow>(conn)
        .expect("ids")
        .into_iter()
        .map(|row| DeliveredTo {
            account,
            contact: ContactId::from_uuid(row.id),
            sent: 1,
            bounced: false,
        })
        .collect()
}

#[test]
fn counting_messages_to_contacts_writes_no_index_entry() {
    let (database, mut conn, account) = filled();
    // One contact of each heap page: a new version needs room on its own page to be
    // heap-only, and a page has room for a few (the table's fillfactor) until it is pruned
    // of the dead ones, which happens as it is read once they are no longer visible.
    let contacts = counted_once(
        &mut conn,
        account,
        "SELECT DISTINCT ON ((ctid::text::point)[0]) id FROM contacts \
         ORDER BY (ctid::text::point)[0], id",
    );
    let before = RowUpdates::of(&mut conn, "contacts");

    // Three record batches, as the worker writes them: every contact counted three times.
    // Each on a connection of its own, opened for it: a backend sends its statistics as
    // soon as it goes idle only if it has not sent any in the last second (else 10 s
    // later).
    for _ in 0..3 {
        let pool = database.pool_of_one();
        in_transaction(&pool, |tx| {
            Ok(tx.count_messages_to_contacts(&contacts, sent_at())?)
        })
        .expect("count");
    }

    assert!(contacts.len() > 10, "{} pages", contacts.len());
    let counted = 3 * i64::try_from(contacts.len()).expect("pages");
    let after = before.after(&mut conn, "contacts", counted);
    assert_eq!(after.updated - before.updated, counted, "updates counted");
    assert_eq!(
        after.heap_only - before.heap_only,
        counted,
        "every count is a heap-only update"
    );
    let counts: Vec<i32> = sql_query("SELECT message_count FROM contacts WHERE message_count > 0")
        .load::<CountRow>(&mut conn)
        .expect("counts")
        .into_iter()
        .map(|row| row.message_count)
        .collect();
    assert_eq!(counts.len(), contacts.len());
    assert!(counts.iter().all(|&count| count == 3), "{counts:?}");
}

/// An announcement's record batches count contacts in about the order they were stored:
/// one statement updates many rows of a page, none of them counted before, and the page
/// must hold a new version of each (migration 37). With migration 34's tenth kept free,
/// about one count in seven was heap-only here.
#[test]
fn a_first_count_of_a_pages_contacts_in_one_batch_is_heap_only() {
    let (database, mut conn, account) = filled();
    let contacts = counted_once(&mut conn, account, "SELECT id FROM contacts ORDER BY ctid");
    let before = RowUpdates::of(&mut conn, "contacts");

    // Batches of 32, the size of the worker's record batches, on one connection that is
    // then dropped so that it sends its statistics.
    let pool = database.pool_of_one();
    for batch in contacts.chunks(32) {
        in_transaction(&pool, |tx| {
            Ok(tx.count_messages_to_contacts(batch, sent_at())?)
        })
        .expect("count");
    }
    drop(pool);

    let counted = i64::try_from(contacts.len()).expect("contacts");
    let after = before.after(&mut conn, "contacts", counted);
    assert_eq!(after.updated - before.updated, counted, "updates counted");
    let heap_only = after.heap_only - before.heap_only;
    assert!(
        heap_only * 10 >= counted * 9,
        "{heap_only} of {counted} first counts were heap-only"
    );
}
