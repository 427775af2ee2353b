//! PostgreSQL goes away and comes back while the real `mailroom serve` takes contact
//! events and delivers transactional mail (docs/operations.md, "Recovering").
//!
//! The test runs its own throwaway cluster (see `outage_support::PrivateCluster`), so it
//! can stop it without disturbing the shared server other tests use. Promises checked:
//! while the database is away every request answers 503 problem+json within the client's
//! 5 s bound (no hang, no 500, no crash) and `/readyz` answers 503; after the restart the
//! service recovers by itself; every event acknowledged with 200 is in the database; every
//! acknowledged message ends `sent`.

mod outage_support;

use std::{
    collections::HashSet,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use diesel::{sql_query, sql_types::Text, Connection, PgConnection, QueryableByName, RunQueryDsl};
use mailroom_test_support::{TestSmtpOptions, TestSmtpServer, TlsMode};
use outage_support::{
    client, create_sending_account, create_user, PrivateCluster, ScratchDir, Server,
};
use serde_json::json;

/// Event posters running side by side.
const EVENT_CLIENTS: usize = 4;
/// How long the database stays away.
const OUTAGE: Duration = Duration::from_secs(4);
/// How long the service may take to recover after the database is back.
const RECOVERY_LIMIT: Duration = Duration::from_secs(15);

/// What one request got: a status (and whether the body was problem+json), or a
/// transport error (timeout, reset).
#[derive(Debug, Clone)]
enum Outcome {
    Status { code: u16, problem: bool },
    Error(#[allow(dead_code)] String),
}

#[derive(Debug, Clone)]
struct Attempt {
    /// When the request was sent, from the start of the run.
    sent_at: Duration,
    took: Duration,
    outcome: Outcome,
    email: String,
}

/// What the client tasks record, shared with the test.
type Log<T> = Arc<Mutex<Vec<T>>>;

#[derive(QueryableByName)]
struct EmailRow {
    #[diesel(sql_type = Text)]
    email: String,
}

#[derive(QueryableByName)]
struct StatusRow {
    #[diesel(sql_type = Text)]
    status: String,
}

async fn send(request: reqwest::RequestBuilder) -> Outcome {
    match request.send().await {
        Ok(response) => send_status(response).await,
        Err(error) => Outcome::Error(error.to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn service_answers_503_while_postgres_is_down_and_recovers_without_losing_events() {
    // `fast`: PostgreSQL disconnects every client and shuts down cleanly.
    outage_and_recovery("fast").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn service_answers_503_while_postgres_has_crashed_and_recovers_without_losing_events() {
    // `immediate`: PostgreSQL stops without a shutdown checkpoint, as in a crash, and
    // replays its WAL on the restart; acknowledged events must survive that too.
    outage_and_recovery("immediate").await;
}

async fn outage_and_recovery(stop_mode: &'static str) {
    let cluster = match PrivateCluster::start() {
        Ok(cluster) => Arc::new(cluster),
        Err(reason) => {
            // Only a machine without PostgreSQL server binaries may skip (a developer's
            // laptop with PostgreSQL in a container); CI has them, and any other failure
            // to run the cluster fails the test.
            assert!(
                reason.starts_with("no PostgreSQL server binaries"),
                "{reason}"
            );
            eprintln!("SKIPPED: cannot run a private PostgreSQL cluster: {reason}");
            return;
        }
    };
    let database_url = cluster.url("mailroom");
    let dir = ScratchDir::new("pg-restart");
    let smtp = TestSmtpServer::start(TestSmtpOptions {
        tls: TlsMode::None,
        ..TestSmtpOptions::default()
    });
    let mut server = Server::start(&dir, &database_url, &[]).await;
    let token = create_user(&dir, &database_url, "ada@example.com");
    let http = client();
    let base = server.base.clone();
    let (account, _template) = create_sending_account(&http, &base, &token, smtp.port()).await;

    let start = Instant::now();
    let running = Arc::new(AtomicBool::new(true));
    let events: Log<Attempt> = Arc::default();
    let messages: Log<(Attempt, Option<String>)> = Arc::default();
    let readiness: Log<Attempt> = Arc::default();
    let mut tasks = Vec::new();

    for poster in 0..EVENT_CLIENTS {
        let (http, base, token, account) =
            (http.clone(), base.clone(), token.clone(), account.clone());
        let (running, events) = (running.clone(), events.clone());
        tasks.push(tokio::spawn(async move {
            let mut sequence = 0;
            while running.load(Ordering::Relaxed) {
                sequence += 1;
                let email = format!("c{poster}-{sequence}@example.com");
                let sent_at = start.elapsed();
                let outcome = send(
                    http.post(format!("{base}/v2/accounts/{account}/events"))
                        .bearer_auth(&token)
                        .json(&json!({"email": email, "slug": "visited"})),
                )
                .await;
                let took = start.elapsed() - sent_at;
                events.lock().unwrap().push(Attempt {
                    sent_at,
                    took,
                    outcome,
                    email,
                });
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }));
    }
    {
        let (http, base, token, account) =
            (http.clone(), base.clone(), token.clone(), account.clone());
        let (running, messages) = (running.clone(), messages.clone());
        tasks.push(tokio::spawn(async move {
            let mut sequence = 0;
            while running.load(Ordering::Relaxed) {
                sequence += 1;
                let email = format!("m{sequence}@example.com");
                let sent_at = start.elapsed();
                let request = http
                    .post(format!("{base}/v2/accounts/{account}/messages"))
                    .bearer_auth(&token)
                    .json(&json!({"slug": "order-receipt", "email": email, "data": {"total": "9.99"}}));
                let (outcome, id) = match request.send().await {
                    Ok(response) if response.status() == 200 => {
                        match response.json::<serde_json::Value>().await {
                            Ok(body) => (
                                Outcome::Status { code: 200, problem: false },
                                body["_id"].as_str().map(str::to_owned),
                            ),
                            Err(error) => (Outcome::Error(error.to_string()), None),
                        }
                    }
                    Ok(response) => (send_status(response).await, None),
                    Err(error) => (Outcome::Error(error.to_string()), None),
                };
                let took = start.elapsed() - sent_at;
                messages.lock().unwrap().push((Attempt { sent_at, took, outcome, email }, id));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }));
    }
    {
        let (http, base) = (http.clone(), base.clone());
        let (running, readiness) = (running.clone(), readiness.clone());
        tasks.push(tokio::spawn(async move {
            while running.load(Ordering::Relaxed) {
                let sent_at = start.elapsed();
                let outcome = send(http.get(format!("{base}/readyz"))).await;
                let took = start.elapsed() - sent_at;
                readiness.lock().unwrap().push(Attempt {
                    sent_at,
                    took,
                    outcome,
                    email: String::new(),
                });
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }));
    }

    // Steady state first, then the outage.
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.assert_running();
    let stopping = start.elapsed();
    let stopper = cluster.clone();
    tokio::task::spawn_blocking(move || stopper.stop_server(stop_mode))
        .await
        .expect("the stop task")
        .unwrap_or_else(|error| panic!("{error}"));
    let stopped = start.elapsed();
    tokio::time::sleep(OUTAGE).await;
    server.assert_running();
    let restarting = start.elapsed();
    let starter = cluster.clone();
    tokio::task::spawn_blocking(move || starter.start_server())
        .await
        .expect("the start task")
        .unwrap_or_else(|error| panic!("{error}"));
    let restarted = start.elapsed();

    // Recovery: an event accepted and /readyz 200, both sent after the restart.
    let recovered = loop {
        let event_ok = events
            .lock()
            .unwrap()
            .iter()
            .find(|attempt| {
                attempt.sent_at >= restarted
                    && matches!(attempt.outcome, Outcome::Status { code: 200, .. })
            })
            .map(|attempt| attempt.sent_at + attempt.took);
        let ready = readiness
            .lock()
            .unwrap()
            .iter()
            .find(|attempt| {
                attempt.sent_at >= restarted
                    && matches!(attempt.outcome, Outcome::Status { code: 200, .. })
            })
            .map(|attempt| attempt.sent_at + attempt.took);
        if let (Some(event_ok), Some(ready)) = (event_ok, ready) {
            break event_ok.max(ready);
        }
        assert!(
            start.elapsed() < restarted + RECOVERY_LIMIT,
            "the service did not recover within {RECOVERY_LIMIT:?} of PostgreSQL's restart \
             (event accepted: {event_ok:?}, ready: {ready:?}); server stderr:\n{}",
            server.stderr()
        );
        server.assert_running();
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Some steady traffic after recovery, then stop the clients.
    tokio::time::sleep(Duration::from_secs(2)).await;
    running.store(false, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("a client task");
    }
    server.assert_running();

    let events = events.lock().unwrap().clone();
    let messages = messages.lock().unwrap().clone();
    let readiness = readiness.lock().unwrap().clone();

    // Every answer is 200 or 503 problem+json, within the client's bound.
    let all: Vec<&Attempt> = events
        .iter()
        .chain(messages.iter().map(|(attempt, _)| attempt))
        .chain(readiness.iter())
        .collect();
    let bad: Vec<&&Attempt> = all
        .iter()
        .filter(|attempt| {
            !matches!(
                attempt.outcome,
                Outcome::Status { code: 200, .. }
                    | Outcome::Status {
                        code: 503,
                        problem: true
                    }
            )
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} requests were neither 200 nor 503 problem+json (first: {:?}); server stderr:\n{}",
        bad.len(),
        all.len(),
        bad.iter().take(5).collect::<Vec<_>>(),
        server.stderr()
    );

    // While the database was away (requests sent after the stop finished and before the
    // restart began) the answers were 503, and /readyz said so too.
    let during = |attempt: &&Attempt| attempt.sent_at >= stopped && attempt.sent_at < restarting;
    let outage_requests: Vec<&Attempt> = all.iter().copied().filter(during).collect();
    let outage_503 = outage_requests
        .iter()
        .filter(|attempt| matches!(attempt.outcome, Outcome::Status { code: 503, .. }))
        .count();
    assert!(
        !outage_requests.is_empty(),
        "no request was sent during the outage"
    );
    assert_eq!(
        outage_503,
        outage_requests.len(),
        "requests sent while PostgreSQL was stopped must all answer 503"
    );
    assert!(
        readiness.iter().filter(during).count() > 0,
        "/readyz was not asked during the outage"
    );
    let slowest_outage = outage_requests
        .iter()
        .map(|attempt| attempt.took)
        .max()
        .unwrap_or_default();

    // No acknowledged event is lost.
    let acknowledged: HashSet<&str> = events
        .iter()
        .filter(|attempt| matches!(attempt.outcome, Outcome::Status { code: 200, .. }))
        .map(|attempt| attempt.email.as_str())
        .collect();
    let mut conn =
        PgConnection::establish(&database_url).expect("connecting to the private cluster");
    let stored: HashSet<String> = sql_query(
        "SELECT c.email FROM contact_events AS e \
         JOIN contacts AS c ON c.account_id = e.account_id AND c.id = e.contact_id \
         WHERE e.slug = 'visited'",
    )
    .load::<EmailRow>(&mut conn)
    .expect("reading the stored events")
    .into_iter()
    .map(|row| row.email)
    .collect();
    let lost: Vec<&&str> = acknowledged
        .iter()
        .filter(|email| !stored.contains(**email))
        .collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged events are not stored: {lost:?}",
        lost.len()
    );

    // Every acknowledged message ends sent. A message whose outcome could not be recorded
    // during the outage is sent again once its lease runs out, so allow for that.
    let queued: Vec<String> = messages.iter().filter_map(|(_, id)| id.clone()).collect();
    assert!(!queued.is_empty(), "no message was queued");
    let draining = Instant::now();
    let unsent = loop {
        let rows =
            sql_query("SELECT status FROM messages WHERE id::text = ANY(string_to_array($1, ','))")
                .bind::<Text, _>(queued.join(","))
                .load::<StatusRow>(&mut conn)
                .expect("reading message statuses");
        let unsent: Vec<String> = rows
            .into_iter()
            .map(|row| row.status)
            .filter(|status| status != "sent")
            .collect();
        if unsent.is_empty() || draining.elapsed() > Duration::from_secs(180) {
            break unsent;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(
        unsent.is_empty(),
        "{} acknowledged messages are not sent after 180 s: {unsent:?}",
        unsent.len()
    );
    let delivered = smtp.messages().len();
    assert!(
        delivered >= queued.len(),
        "the SMTP server received {delivered} messages for {} queued",
        queued.len()
    );
    server.assert_running();

    let event_503 = events
        .iter()
        .filter(|attempt| matches!(attempt.outcome, Outcome::Status { code: 503, .. }))
        .count();
    eprintln!(
        "pg_restart figures (pg_ctl stop -m {stop_mode}): stop took {:?}, outage {:?}; requests during the outage {} \
         (503: {outage_503}, slowest answer {:?}); events sent {}, acknowledged {}, 503 {}, \
         stored {} (stored though unacknowledged: {}); messages queued {}, delivered {} \
         (duplicates {}), all sent {:?} after the clients stopped; recovered {:?} after \
         PostgreSQL accepted connections again",
        stopped - stopping,
        restarting - stopped,
        outage_requests.len(),
        slowest_outage,
        events.len(),
        acknowledged.len(),
        event_503,
        stored.len(),
        stored.len() - acknowledged.len(),
        queued.len(),
        delivered,
        delivered - queued.len(),
        draining.elapsed(),
        recovered - restarted,
    );
}

async fn send_status(response: reqwest::Response) -> Outcome {
    let code = response.status().as_u16();
    let problem = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/problem+json"));
    match response.bytes().await {
        Ok(_) => Outcome::Status { code, problem },
        Err(error) => Outcome::Error(format!("reading the body: {error}")),
    }
}
