//! Load: 64 concurrent clients record contact events for 60 s against the real
//! `mailroom serve` while an announcement to 20,000 contacts is being sent through a
//! loopback SMTP server. Every request must answer 200 within the client's 5 s bound;
//! the figures (requests, p50/p99/max latency, messages sent in the window) are printed.
//!
//! Long, so `#[ignore]`d: `cargo xtask reliability` runs it. The API rate limit is off
//! (MAILROOM_RATE_LIMIT_PER_SECOND=off), as in benchmarks. `MAILROOM_LOAD_SECONDS` and
//! `MAILROOM_LOAD_CONTACTS` shorten a run while working on the test.

mod outage_support;

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use diesel::connection::SimpleConnection;
use mailroom_test_support::{TestDatabase, TestSmtpOptions, TestSmtpServer, TlsMode};
use outage_support::{
    client, create_sending_account, create_user, percentile, post_ok, ScratchDir, Server,
};
use serde_json::json;

const CLIENTS: usize = 64;

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "long (about 90 s): run by `cargo xtask reliability`"]
async fn load_64_clients_record_events_while_an_announcement_sends() {
    let window = Duration::from_secs(setting("MAILROOM_LOAD_SECONDS", 60));
    let contacts = setting("MAILROOM_LOAD_CONTACTS", 20_000);
    let database = TestDatabase::create();
    let dir = ScratchDir::new("load");
    let smtp = TestSmtpServer::start(TestSmtpOptions {
        tls: TlsMode::None,
        ..TestSmtpOptions::default()
    });
    let server = Server::start(&dir, database.url(), &[]).await;
    let token = create_user(&dir, database.url(), "ada@example.com");
    let http = client();
    let base = server.base.clone();
    let (account, template) = create_sending_account(&http, &base, &token, smtp.port()).await;

    // The audience, written with SQL: 20,000 contacts through the API would be a test of
    // its own (and is, in the audience benchmark).
    database
        .connection()
        .batch_execute(&format!(
            "INSERT INTO contacts (account_id, id, email, created_at)
               SELECT '{account}', gen_random_uuid(), 'a' || g || '@audience.example',
                      now() - interval '1 day'
               FROM generate_series(1, {contacts}) g;
             ANALYZE contacts;"
        ))
        .expect("loading the audience");
    post_ok(
        &http,
        &format!("{base}/v2/accounts/{account}/announcements"),
        &token,
        &json!({"name": "Launch", "templateId": template, "includeUnsubscribed": false}),
    )
    .await;

    let running = Arc::new(AtomicBool::new(true));
    let latencies: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let sent_before = smtp.messages().len();
    let started = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|client_number| {
            let (http, base, token, account) =
                (http.clone(), base.clone(), token.clone(), account.clone());
            let (running, latencies, failures) =
                (running.clone(), latencies.clone(), failures.clone());
            tokio::spawn(async move {
                let mut sequence = 0u64;
                let mut mine = Vec::new();
                while running.load(Ordering::Relaxed) {
                    sequence += 1;
                    // A few contacts per client, many events each: recording an event
                    // for a known contact is the common case.
                    let email = format!("load{client_number}-{}@example.com", sequence % 16);
                    let sent = Instant::now();
                    let result = http
                        .post(format!("{base}/v2/accounts/{account}/events"))
                        .bearer_auth(&token)
                        .json(&json!({"email": email, "slug": format!("step_{}", sequence % 4)}))
                        .send()
                        .await;
                    let outcome = match result {
                        Ok(response) => {
                            let status = response.status();
                            match response.text().await {
                                Ok(_) if status == 200 => Ok(()),
                                Ok(body) => Err(format!("{status}: {body}")),
                                Err(error) => Err(format!("reading the body: {error}")),
                            }
                        }
                        Err(error) => Err(error.to_string()),
                    };
                    mine.push(sent.elapsed());
                    if let Err(failure) = outcome {
                        failures.lock().unwrap().push(failure);
                    }
                }
                latencies.lock().unwrap().extend(mine);
            })
        })
        .collect();
    tokio::time::sleep(window).await;
    running.store(false, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("a client task");
    }
    let elapsed = started.elapsed();
    let sent_in_window = smtp.messages().len() - sent_before;

    let mut latencies = latencies.lock().unwrap().clone();
    latencies.sort_unstable();
    let failures = failures.lock().unwrap().clone();
    eprintln!(
        "load figures: {CLIENTS} clients for {elapsed:.1?}: {} requests ({:.0}/s), {} errors; \
         latency p50 {:?}, p99 {:?}, max {:?}; announcement to {contacts} contacts: {} \
         messages sent in the window ({:.0}/s)",
        latencies.len(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        failures.len(),
        percentile(&latencies, 50.0),
        percentile(&latencies, 99.0),
        latencies.last().copied().unwrap_or_default(),
        sent_in_window,
        sent_in_window as f64 / elapsed.as_secs_f64(),
    );
    assert!(
        failures.is_empty(),
        "{} of {} requests failed; first: {:?}; server stderr:\n{}",
        failures.len(),
        latencies.len(),
        failures.iter().take(5).collect::<Vec<_>>(),
        server.stderr()
    );
    assert!(
        sent_in_window > 0,
        "the announcement sent nothing during the window; server stderr:\n{}",
        server.stderr()
    );
}
