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

/// Listens on `url` and waits until the listener says it listens.
async fn listening(
    url: &str,
) -> (
    tokio::task::JoinHandle<()>,
    mpsc::UnboundedReceiver<QueueEvent>,
) {
    let (listener, mut events) = listen(url);
    assert_eq!(next(&mut events).await, QueueEvent::Listening);
    (listener, events)
}

async fn next(events: &mut mpsc::UnboundedReceiver<QueueEvent>) -> QueueEvent {
    tokio::time::timeout(PATIENCE, events.recv())
        .await
        .expect("an event within the patience")
        .expect("the listener lives")
}

/// Sends one wake-up over `database`'s pool. Keep the handle until the wake-up is heard or
/// the test is over: the sending thread ends with the last handle.
fn wake_up(database: &TestDatabase) -> PgQueueWakeup {
    let wakeup = PgQueueWakeup::new(&database.pool_of_one()).expect("the sending thread");
    wakeup.messages_queued();
    wakeup
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
    let (listener, mut events) = listening(database.url()).await;

    let _wakeup = wake_up(&database);
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
    let (listener, mut events) = listening(ours.url()).await;

    let _wakeup = wake_up(&theirs);
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
