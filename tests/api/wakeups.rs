//! The message workers' wake-ups (docs/operations.md, "Waking the workers: LISTEN/NOTIFY"):
//! a transactional send reaches its mail server without waiting for the worker's idle
//! poll, which the test makes a minute long.

use std::time::{Duration, Instant};

use mailroom_postgres::listen_for_queued_messages;
use mailroom_server::message_worker::{MessageWorker, PARALLEL_ROUNDS};
use tokio::sync::watch;

use crate::delivery_support::Delivery;

const PATIENCE: Duration = Duration::from_secs(10);

/// Waits up to [`PATIENCE`] for `done`.
async fn within_patience(done: impl Fn() -> bool) -> bool {
    let started = Instant::now();
    while !done() && started.elapsed() < PATIENCE {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    done()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_reaches_its_server_without_waiting_for_the_idle_poll() {
    let delivery = Delivery::new(|_| {}).await;
    let worker = MessageWorker::new(delivery.app.services.clone(), &delivery.app.config)
        .with_listening_poll(Duration::from_secs(60));
    let listener = tokio::spawn(listen_for_queued_messages(
        delivery.app.config.database_url.clone(),
        {
            let worker = worker.clone();
            move |event| worker.hear(event)
        },
    ));
    assert!(
        within_patience(|| worker.listening()).await,
        "the worker listens"
    );
    let (_stop, stopped) = watch::channel(false);
    let loops: Vec<_> = (0..PARALLEL_ROUNDS)
        .map(|_| {
            let (worker, stopped) = (worker.clone(), stopped.clone());
            tokio::spawn(async move { worker.run(stopped).await })
        })
        .collect();
    // Both loops make their first, empty, claims and settle into their minute-long wait.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut latencies = Vec::new();
    for n in 0..3 {
        let sent = Instant::now();
        delivery.queue(&format!("reader{n}@example.org")).await;
        let arrived = within_patience(|| delivery.smtp.message_count() > n).await;
        assert!(arrived, "send {n} waited for the idle poll");
        latencies.push(sent.elapsed());
    }
    println!("wake-ups: POST to the server's receipt {latencies:?} (idle poll 60 s)");
    for handle in loops {
        handle.abort();
    }
    listener.abort();
}
