//! Mail server health marks against a real database: the first refusal's time is kept,
//! a refusal by settings saved over since marks nothing, a save and a working session
//! clear the mark, and the metrics snapshot counts unhealthy servers.

use diesel::connection::SimpleConnection;
use mailroom_app::ports::in_transaction;
use mailroom_domain::{AccountId, MailServerId, Timestamp};
use mailroom_postgres::{PgDatabase, PoolSettings};
use mailroom_test_support::TestDatabase;

const ACCOUNT: &str = "0190a000-0000-7000-8000-000000000001";
const SERVER: &str = "0190a000-0000-7000-8000-000000000002";
const SAVED: &str = "2026-11-24T10:00:00.000Z";

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).expect("timestamp")
}

#[test]
fn health_marks_follow_refusals_sessions_and_saves() {
    let db = TestDatabase::create();
    db.connection()
        .batch_execute(&format!(
            "INSERT INTO accounts (id, name, created_at) VALUES ('{ACCOUNT}', 'a', now());
             INSERT INTO mail_servers (account_id, id, service_type, host, port, secure,
                 require_tls, username, password, default_from_email, default_from_name,
                 created_at, updated_at)
             VALUES ('{ACCOUNT}', '{SERVER}', 'smtp', 'smtp.example.com', 587, false, true,
                 'apikey', '\\x00', 'a@example.com', '', '{SAVED}', '{SAVED}');"
        ))
        .expect("fill");
    let database = PgDatabase::connect(db.url(), &PoolSettings::default()).expect("pool");
    let account = AccountId::parse(ACCOUNT).expect("id");
    let server = MailServerId::parse(SERVER).expect("id");
    // One transaction per step.
    macro_rules! run {
        (|$tx:ident| $body:expr) => {
            in_transaction(&database, |$tx| Ok($body?)).expect("transaction")
        };
    }

    let first = at("2026-11-24T11:00:00.000Z");
    let later = at("2026-11-24T11:05:00.000Z");
    let since = run!(|tx| {
        tx.mark_mail_server_unhealthy(account, server, at(SAVED), first, "AUTH: 535 one")
    });
    assert_eq!(since, Some(first));
    let since = run!(|tx| {
        tx.mark_mail_server_unhealthy(account, server, at(SAVED), later, "AUTH: 535 two")
    });
    assert_eq!(since, Some(first), "the spell started at the first refusal");
    let record = run!(|tx| tx.find_mail_server(account, server)).expect("stored");
    let unhealthy = record.server.unhealthy.clone().expect("unhealthy");
    assert_eq!(
        (unhealthy.since, unhealthy.last_error.as_str()),
        (first, "AUTH: 535 two")
    );
    let stats = run!(|tx| tx.queue_stats(later));
    assert_eq!(stats.unhealthy_mail_servers, 1);

    // Saving writes the record as given: a new save carries no mark.
    let mut saved = record.clone();
    saved.server.updated_at = at("2026-11-24T12:00:00.000Z");
    saved.server.unhealthy = None;
    assert!(run!(|tx| tx.update_mail_server(account, &saved)));
    let healthy = run!(|tx| tx.find_mail_server(account, server)).expect("stored");
    assert_eq!(healthy.server.unhealthy, None);
    // A refusal by the settings saved over marks nothing.
    let stale = run!(|tx| {
        tx.mark_mail_server_unhealthy(account, server, at(SAVED), later, "AUTH: 535 old")
    });
    assert_eq!(stale, None);
    assert_eq!(run!(|tx| tx.queue_stats(later)).unhealthy_mail_servers, 0);

    // A working session clears a mark, once.
    let version = saved.server.updated_at;
    run!(|tx| tx.mark_mail_server_unhealthy(account, server, version, later, "AUTH: 535 new"));
    assert!(run!(|tx| tx.mark_mail_server_healthy(account, server)));
    assert!(!run!(|tx| tx.mark_mail_server_healthy(account, server)));
    let cleared = run!(|tx| tx.find_mail_server(account, server)).expect("stored");
    assert_eq!(cleared.server.unhealthy, None);
}
