//! The queue's wake-ups over `LISTEN`/`NOTIFY` (docs/operations.md, "Waking the workers:
//! LISTEN/NOTIFY"): a listener hears a wake-up sent by another connection of the same
//! database, only once it said it listens, and says it is deaf when it cannot connect.

use std::time::Duration;

use mailroom_app::ports::{QueueEvent, QueueWakeup};
use mailroom_postgres::{listen_for_queued_messages, PgQueueWakeup};
use mailroom_test_support::TestDatabase;
use tokio::sync::mpsc;

const PATIENCE: Duration = Duration::from_secs(10);

/// Listens on `url` in a task; what it hears arrives on the receiver.
fn listen(
    url: &str,
) -> (
    tokio::task::JoinHandle<()>,
    mpsc::UnboundedReceiver<QueueEvent>,
) {
    let (heard, events) = mpsc::unbounded_channel();
    let listener = tokio::spawn(listen_for_queued_messages(url.to_owned(), move |event| {
        let _ = heard.send(event);
    }));
    (listener, events)
}

async fn next(events: &mut mpsc::UnboundedReceiver<QueueEvent>) -> QueueEvent {
    tokio::time::timeout(PATIENCE, events.recv())
        .await
        .expect("an event within the patience")
        .expect("the listener lives")
}

/// Asserts that the listener hears nothing for `quiet`.
async fn assert_nothing_heard(
    events: &mut mpsc::UnboundedReceiver<QueueEvent>,
    quiet: Duration,
    why: &str,
) {
    let heard = tokio::time::timeout(quiet, events.recv()).await;
    assert!(heard.is_err(), "{why}: heard {heard:?}");
}

#[tokio::test]
async fn a_wake_up_sent_on_one_connection_is_heard_by_the_listener() {
    let database = TestDatabase::create();
    let (listener, mut events) = listen(database.url());
    assert_eq!(next(&mut events).await, QueueEvent::Listening);

    let wakeup = PgQueueWakeup::new(&database.pool_of_one()).expect("the sending thread");
    wakeup.messages_queued();
    assert_eq!(next(&mut events).await, QueueEvent::Queued);

    // Nothing more was sent, so nothing more is heard.
    assert_nothing_heard(
        &mut events,
        Duration::from_millis(300),
        "one wake-up, one notification",
    )
    .await;
    listener.abort();
}

#[tokio::test]
async fn wake_ups_of_another_database_are_not_heard() {
    let (ours, theirs) = (TestDatabase::create(), TestDatabase::create());
    let (listener, mut events) = listen(ours.url());
    assert_eq!(next(&mut events).await, QueueEvent::Listening);

    let wakeup = PgQueueWakeup::new(&theirs.pool_of_one()).expect("the sending thread");
    wakeup.messages_queued();
    assert_nothing_heard(
        &mut events,
        Duration::from_millis(500),
        "another database's queue is not ours",
    )
    .await;
    listener.abort();
}

#[tokio::test]
async fn a_listener_that_cannot_connect_is_deaf_and_never_listening() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("address")
        .port();
    let (listener, mut events) = listen(&format!("postgres://postgres@127.0.0.1:{port}/x"));
    assert_eq!(next(&mut events).await, QueueEvent::Deaf);
    // It tries again after its pause, and fails again.
    assert_eq!(next(&mut events).await, QueueEvent::Deaf);
    listener.abort();
}
