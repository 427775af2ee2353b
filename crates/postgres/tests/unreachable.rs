//! Checkouts while the server cannot be reached: `Unavailable` at once, not after the
//! pool's whole connection timeout; a busy pool of healthy connections still waits.

use std::{
    net::TcpListener,
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use mailroom_app::{
    ports::{in_transaction, Database},
    AppError, StoreError,
};
use mailroom_postgres::{PgDatabase, PoolSettings};
use mailroom_test_support::TestDatabase;

const TIMEOUT: Duration = Duration::from_secs(3);

/// A loopback URL on a port nothing listens on: connecting is refused at once.
fn refused_url() -> String {
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("address")
        .port();
    format!("postgres://postgres@127.0.0.1:{port}/mailroom")
}

#[test]
fn a_refused_server_answers_unavailable_well_before_the_connection_timeout() {
    let database = PgDatabase::connect(
        &refused_url(),
        &PoolSettings {
            max_size: 4,
            connection_timeout: TIMEOUT,
            ..PoolSettings::default()
        },
    )
    .expect("the pool builds without connecting");
    for attempt in 0..3 {
        let started = Instant::now();
        let result = in_transaction(&database, |_| Ok(()));
        let took = started.elapsed();
        assert!(
            matches!(result, Err(AppError::Unavailable(_))),
            "attempt {attempt}: expected Unavailable, got {result:?}"
        );
        assert!(
            took < Duration::from_secs(1),
            "attempt {attempt}: Unavailable took {took:?} (the timeout is {TIMEOUT:?})"
        );
        let started = Instant::now();
        let health = database.check_health();
        assert!(
            matches!(health, Err(StoreError::Unavailable(_))),
            "attempt {attempt}: health {health:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}

#[test]
fn a_busy_healthy_pool_waits_for_a_connection() {
    let db = TestDatabase::create();
    let database = PgDatabase::connect(
        db.url(),
        &PoolSettings {
            max_size: 1,
            connection_timeout: TIMEOUT,
            ..PoolSettings::default()
        },
    )
    .expect("pool");
    in_transaction(&database, |_| Ok(())).expect("the server answers");

    // One transaction holds the only connection for 1 s; a second one waits for it.
    let (holding, held) = mpsc::channel();
    let holder = {
        let database = database.clone();
        thread::spawn(move || {
            in_transaction(&database, |_| {
                holding.send(()).expect("signal");
                thread::sleep(Duration::from_secs(1));
                Ok(())
            })
        })
    };
    held.recv().expect("the holder has the connection");
    let started = Instant::now();
    in_transaction(&database, |_| Ok(())).expect("a waiting checkout gets the connection");
    let waited = started.elapsed();
    holder.join().expect("holder").expect("holder transaction");
    assert!(
        waited >= Duration::from_millis(500),
        "the second checkout should have waited for the first (waited {waited:?})"
    );
}
