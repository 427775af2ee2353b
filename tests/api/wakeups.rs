//! The message workers' wake-ups (docs/operations.md, "Waking the workers: LISTEN/NOTIFY"):
//! a transactional send, and an event that triggers an automation, reach the mail server
//! without waiting for the worker's idle poll, which these tests make a minute long.

use std::time::{Duration, Instant};

use mailroom_postgres::listen_for_queued_messages;
use mailroom_server::message_worker::{MessageWorker, PARALLEL_ROUNDS};
use serde_json::json;
use tokio::{sync::watch, task::JoinHandle};

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

/// A worker that polls once a minute and listens for wake-ups, its claim loops idle; its
/// tasks end when it is dropped.
struct IdleWorker {
    tasks: Vec<JoinHandle<()>>,
    /// Held so the loops never see a stop (a dropped sender would end their waits).
    _stop: watch::Sender<bool>,
}

impl IdleWorker {
    async fn start(delivery: &Delivery) -> Self {
        let worker = MessageWorker::new(delivery.app.services.clone(), &delivery.app.config)
            .with_listening_poll(Duration::from_secs(60));
        let mut tasks = vec![tokio::spawn(listen_for_queued_messages(
            delivery.app.config.database_url.clone(),
            {
                let worker = worker.clone();
                move |event| worker.hear(event)
            },
        ))];
        assert!(
            within_patience(|| worker.listening()).await,
            "the worker listens"
        );
        let (stop, stopped) = watch::channel(false);
        tasks.extend((0..PARALLEL_ROUNDS).map(|_| {
            let (worker, stopped) = (worker.clone(), stopped.clone());
            tokio::spawn(async move { worker.run(stopped).await })
        }));
        // Both loops make their first, empty, claims and settle into their minute's wait.
        tokio::time::sleep(Duration::from_millis(300)).await;
        Self { tasks, _stop: stop }
    }
}

impl Drop for IdleWorker {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_reaches_its_server_without_waiting_for_the_idle_poll() {
    let delivery = Delivery::new(|_| {}).await;
    let _worker = IdleWorker::start(&delivery).await;
    let mut latencies = Vec::new();
    for n in 0..3 {
        let sent = Instant::now();
        delivery.queue(&format!("reader{n}@example.org")).await;
        let arrived = within_patience(|| delivery.smtp.message_count() > n).await;
        assert!(arrived, "send {n} waited for the idle poll");
        latencies.push(sent.elapsed());
    }
    println!("wake-ups: POST to the server's receipt {latencies:?} (idle poll 60 s)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_that_triggers_an_automation_wakes_the_worker() {
    let delivery = Delivery::new(|_| {}).await;
    let template = delivery
        .post(
            "/templates",
            &json!({"name": "Welcome", "slug": "greeting", "subject": "Hello",
                    "content": "<p>Hello</p>"}),
        )
        .await;
    delivery
        .post(
            "/automations",
            &json!({"name": "Welcome", "templateId": template["_id"],
                    "triggerEventSlug": "signed_up", "triggerEventCondition": "everytime",
                    "timingCondition": "immediately", "isEnabled": true}),
        )
        .await;
    let _worker = IdleWorker::start(&delivery).await;
    let sent = Instant::now();
    delivery
        .post(
            "/events",
            &json!({"email": "grace@example.org", "slug": "signed_up"}),
        )
        .await;
    let arrived = within_patience(|| delivery.smtp.message_count() == 1).await;
    println!(
        "wake-ups: event to the server's receipt {:?} (idle poll 60 s)",
        sent.elapsed()
    );
    assert!(arrived, "the automation's message waited for the idle poll");
}
