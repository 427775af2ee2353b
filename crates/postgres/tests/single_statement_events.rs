//! An event nothing listens to is written by one statement outside a transaction
//! (`Database::run_single_statement`, docs/performance.md "Design choices, measured"), against a real database: it writes everything the transactional
//! event writes; with a listening automation it writes nothing (that event must be
//! written with the messages it queues); and the statement is bounded by the session's
//! statement timeout, while the workers' transactions keep the server's setting.

use std::{
    thread,
    time::{Duration, Instant},
};

use diesel::{connection::SimpleConnection, pg::PgConnection, sql_query, sql_types, RunQueryDsl};
use mailroom_app::{
    ports::{in_single_statement, in_transaction, EventOfEmail, RecordedEvent},
    AppError,
};
use mailroom_domain::{
    email::EmailAddress, slug::EventSlug, AccountId, ContactEventId, ContactId, Timestamp, Uuid,
};
use mailroom_postgres::{PgDatabase, PoolSettings};
use mailroom_test_support::TestDatabase;

const ACCOUNT: &str = "0190a000-0000-7000-8000-000000000002";
const TIMEOUT: Duration = Duration::from_millis(300);

fn account() -> AccountId {
    AccountId::from_uuid(Uuid::parse_str(ACCOUNT).expect("account id"))
}

/// The workers' database and the requests' (sessions and requests with `TIMEOUT`).
fn databases(db: &TestDatabase) -> (PgDatabase, PgDatabase) {
    let workers = PgDatabase::connect(
        db.url(),
        &PoolSettings {
            max_size: 4,
            statement_timeout: Some(TIMEOUT),
            ..PoolSettings::default()
        },
    )
    .expect("pool");
    let requests = workers.with_statement_timeout(Some(TIMEOUT));
    (workers, requests)
}

fn setup(conn: &mut PgConnection) {
    conn.batch_execute(&format!(
        "INSERT INTO accounts (id, name, created_at) VALUES ('{ACCOUNT}', 'events', now());
         INSERT INTO templates (account_id, id, name, slug, subject, content, content_type,
                                created_at, updated_at)
         VALUES ('{ACCOUNT}', gen_random_uuid(), 't', 't', 's', 'c', 'html', now(), now());
         INSERT INTO automations (account_id, id, name, template_id, trigger_event_slug,
                                  trigger_condition, timing_condition, is_enabled, created_at)
         SELECT '{ACCOUNT}', gen_random_uuid(), 'a', id, 'purchased', 'everytime',
                'immediately', TRUE, now()
         FROM templates WHERE account_id = '{ACCOUNT}'"
    ))
    .expect("account, template and automation");
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = sql_types::BigInt)]
    count: i64,
}

/// How many rows each table the event writes holds for `slug`: contacts, events, name
/// increments, metas, `event.<slug>` attributes.
fn written(conn: &mut PgConnection, slug: &str) -> [i64; 5] {
    [
        "SELECT count(*) FROM contacts".to_owned(),
        format!("SELECT count(*) FROM contact_events WHERE slug = '{slug}'"),
        format!("SELECT count(*) FROM contact_event_increments WHERE slug = '{slug}'"),
        format!("SELECT count(*) FROM attribute_metas WHERE slug = 'event.{slug}'"),
        format!("SELECT count(*) FROM contact_attributes WHERE slug = 'event.{slug}'"),
    ]
    .map(|sql| {
        sql_query(&sql)
            .get_result::<Count>(conn)
            .expect("count")
            .count
    })
}

fn now() -> Timestamp {
    Timestamp::parse("2026-03-02T00:00:00Z").expect("timestamp")
}

fn email(text: &str) -> EmailAddress {
    EmailAddress::parse(text).expect("email")
}

/// A new event of `email` with `slug`, now.
fn event_of<'a>(email: &'a EmailAddress, slug: &'a EventSlug) -> EventOfEmail<'a> {
    EventOfEmail {
        id: ContactEventId::from_uuid(Uuid::now_v7()),
        email,
        new_contact: ContactId::from_uuid(Uuid::now_v7()),
        slug,
        occurred_at: now(),
    }
}

/// The event as a request without attributes first records it: one statement.
fn unless_listened(
    database: &PgDatabase,
    email: &EmailAddress,
    slug: &str,
) -> Result<Option<ContactId>, AppError> {
    let slug = EventSlug::normalize(slug).expect("slug");
    in_single_statement(database, |db| {
        Ok(db.record_event_unless_listened(account(), &event_of(email, &slug))?)
    })
}

/// The event recorded in a transaction of `database`.
fn in_a_transaction(
    database: &PgDatabase,
    email: &EmailAddress,
    slug: &str,
) -> Result<RecordedEvent, AppError> {
    let slug = EventSlug::normalize(slug).expect("slug");
    in_transaction(database, |tx| {
        Ok(tx.record_event(account(), &event_of(email, &slug))?)
    })
}

#[test]
fn an_event_nothing_listens_to_is_written_whole_and_one_listened_to_not_at_all() {
    let db = TestDatabase::create();
    let mut conn = db.connection();
    setup(&mut conn);
    let (_, requests) = databases(&db);

    let grace = email("grace@example.org");
    let created = unless_listened(&requests, &grace, "signed_up")
        .expect("written")
        .expect("nothing listens to signed_up");
    assert_eq!(written(&mut conn, "signed_up"), [1, 1, 1, 1, 1]);
    let found = unless_listened(&requests, &grace, "signed_up")
        .expect("written")
        .expect("nothing listens to signed_up");
    assert_eq!(found, created, "the second event finds the contact");
    assert_eq!(written(&mut conn, "signed_up"), [1, 2, 2, 1, 1]);

    // An automation listens to `purchased`: not a row, not even the new contact.
    let alan = email("alan@example.org");
    assert_eq!(
        unless_listened(&requests, &alan, "purchased").expect("answered"),
        None
    );
    assert_eq!(written(&mut conn, "purchased"), [1, 0, 0, 0, 0]);
    // The transactional event writes it and says an automation listens.
    let recorded = in_a_transaction(&requests, &alan, "purchased").expect("recorded");
    assert!(recorded.triggers);
    assert_eq!(written(&mut conn, "purchased"), [2, 1, 1, 1, 1]);
}

#[test]
fn a_single_statement_is_bounded_by_the_sessions_timeout_and_a_workers_transaction_is_not() {
    let db = TestDatabase::create();
    let mut conn = db.connection();
    setup(&mut conn);
    let (workers, requests) = databases(&db);
    let grace = email("grace@example.org");
    unless_listened(&requests, &grace, "signed_up")
        .expect("written")
        .expect("nothing listens");

    // Another session holds grace's `event.signed_up` row: the next event's upsert of it
    // waits for that lock.
    let mut holder = db.connection();
    holder
        .batch_execute(
            "BEGIN; SELECT 1 FROM contact_attributes WHERE slug = 'event.signed_up' FOR UPDATE",
        )
        .expect("lock");
    let started = Instant::now();
    let outcome = unless_listened(&requests, &grace, "signed_up");
    let waited = started.elapsed();
    assert!(
        matches!(outcome, Err(AppError::TimedOut(_))),
        "{outcome:?} after {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(3),
        "cancelled after {waited:?}"
    );

    // A worker's transaction on the same pool (whose sessions carry the timeout) keeps
    // the server's setting: it waits for the lock past the timeout and then writes.
    let waiting =
        thread::spawn(move || in_a_transaction(&workers, &email("grace@example.org"), "signed_up"));
    thread::sleep(TIMEOUT * 3);
    holder.batch_execute("COMMIT").expect("release");
    waiting
        .join()
        .expect("worker thread")
        .expect("the worker's event is written after the wait");
    assert_eq!(
        written(&mut conn, "signed_up")[1],
        2,
        "the first and the worker's"
    );
}
