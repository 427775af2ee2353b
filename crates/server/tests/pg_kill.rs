//! PostgreSQL killed with SIGKILL during an announcement: every process of the server at
//! once, no shutdown, no checkpoint (see `outage_support::PrivateCluster::kill_server`),
//! on a cluster of the test's own with production durability (fsync, synchronous_commit
//! and full_page_writes at their defaults, on). It restarts, replays its WAL, and the
//! real `mailroom serve` (API) and `mailroom worker` carry on by themselves.
//!
//! Promises checked: every message the API acknowledged as queued (a transactional
//! `POST …/messages` answered 200, before, during and after the crash) is in the
//! database after the restart and ends `sent`; the announcement acknowledged before the
//! crash reaches every contact and ends `completed` with its full audience; no message is
//! left `queued` or `sending`; and duplicates are no more than the messages the worker
//! process can have in flight (claimed, maybe accepted by the SMTP server, outcome not
//! yet recorded) when the database went away.

mod outage_support;
mod support;

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use diesel::{sql_query, sql_types::Text, Connection, PgConnection, QueryableByName, RunQueryDsl};
use mailroom_server::message_worker::MAX_HELD;
use mailroom_test_support::{TestDatabase, TestSmtpOptions};
use outage_support::PrivateCluster;
use serde_json::json;
use support::{count_from_env, Deliveries, Deployment};

/// How long PostgreSQL stays dead before it is started again.
const OUTAGE: Duration = Duration::from_secs(3);
/// How long the service may take to be ready again once PostgreSQL accepts connections.
const RECOVERY_LIMIT: Duration = Duration::from_secs(30);

#[derive(QueryableByName)]
struct MessageRow {
    #[diesel(sql_type = Text)]
    id: String,
    #[diesel(sql_type = Text)]
    status: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_killed_during_an_announcement_loses_no_queued_message() {
    let contacts = count_from_env("MAILROOM_PG_KILL_CONTACTS", 3_000);
    let cluster = match PrivateCluster::start() {
        Ok(cluster) => Arc::new(cluster),
        Err(reason) => {
            // As in pg_restart.rs: only a machine without the server binaries may skip.
            assert!(
                reason.starts_with("no PostgreSQL server binaries"),
                "{reason}"
            );
            eprintln!("SKIPPED: cannot run a private PostgreSQL cluster: {reason}");
            return;
        }
    };
    let database = TestDatabase::create_on(&cluster.url("postgres"));
    let database_url = database.url().to_owned();
    let deployment = Deployment::start_on(
        "pg_kill",
        TestSmtpOptions {
            // Each message waits at the SMTP server, so the crash finds some in flight.
            accept_delay: Some(Duration::from_millis(20)),
            ..TestSmtpOptions::default()
        },
        database,
    )
    .await;
    let mut worker = deployment.start_worker("worker-a").await;
    deployment.import_contacts(contacts).await;
    let announcement = deployment.announce().await;

    // Transactional sends all along, each answered 200 (queued) or not; the poster's
    // client bounds each request by 5 s, so the outage shows as errors, not a hang.
    let running = Arc::new(AtomicBool::new(true));
    let acknowledged: Arc<Mutex<Vec<String>>> = Arc::default();
    let refused = Arc::new(Mutex::new(0_usize));
    let poster = {
        let http = outage_support::client();
        let url = format!(
            "{}/v2/accounts/{}/messages",
            deployment.base, deployment.account
        );
        let token = deployment.token.clone();
        let (running, acknowledged, refused) =
            (running.clone(), acknowledged.clone(), refused.clone());
        tokio::spawn(async move {
            let mut sequence = 0;
            while running.load(Ordering::Relaxed) {
                sequence += 1;
                let request = http.post(&url).bearer_auth(&token).json(
                    &json!({"slug": "news", "email": format!("receipt-{sequence}@example.com")}),
                );
                let id = match request.send().await {
                    Ok(response) if response.status() == 200 => response
                        .json::<serde_json::Value>()
                        .await
                        .ok()
                        .and_then(|body| body["_id"].as_str().map(str::to_owned)),
                    _ => None,
                };
                match id {
                    Some(id) => acknowledged.lock().unwrap().push(id),
                    None => *refused.lock().unwrap() += 1,
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        })
    };

    // The crash falls while the announcement's messages are going out.
    deployment
        .wait_for_deliveries(
            contacts * 3 / 10,
            &mut [&mut worker],
            Duration::from_secs(300),
        )
        .await;
    let at_kill = deployment.smtp.message_count();
    let acknowledged_at_kill = acknowledged.lock().unwrap().len();
    let killer = cluster.clone();
    let killed = tokio::task::spawn_blocking(move || killer.kill_server())
        .await
        .expect("the kill task")
        .unwrap_or_else(|error| panic!("{error}"));
    tokio::time::sleep(OUTAGE).await;
    worker.assert_running();
    let starter = cluster.clone();
    tokio::task::spawn_blocking(move || starter.start_server())
        .await
        .expect("the start task")
        .unwrap_or_else(|error| panic!("{error}"));
    let restarted = Instant::now();
    // The API answers 503 until its pool reaches the server again (after the WAL replay).
    let recovered = loop {
        let ready = deployment
            .http
            .get(format!("{}/readyz", deployment.base))
            .send()
            .await
            .is_ok_and(|response| response.status() == 200);
        if ready {
            break restarted.elapsed();
        }
        assert!(
            restarted.elapsed() < RECOVERY_LIMIT,
            "the API was not ready {RECOVERY_LIMIT:?} after PostgreSQL's restart"
        );
        worker.assert_running();
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    let completed = deployment
        .wait_for_completion(&announcement, &mut [&mut worker], Duration::from_secs(600))
        .await;
    let completed_after = restarted.elapsed();
    running.store(false, Ordering::Relaxed);
    poster.await.expect("the poster");
    let acknowledged = acknowledged.lock().unwrap().clone();
    let refused = *refused.lock().unwrap();
    assert!(
        acknowledged.len() > acknowledged_at_kill,
        "no message was acknowledged after the restart: the API did not recover"
    );

    // Every acknowledged message is there and ends sent (a message whose outcome the
    // crash kept from being recorded is sent again once its lease runs out).
    let mut sql = PgConnection::establish(&database_url).expect("connecting to the cluster");
    let draining = Instant::now();
    let (missing, unsent) = loop {
        let statuses: HashMap<String, String> = sql_query(
            "SELECT id::text AS id, status FROM messages \
             WHERE id::text = ANY(string_to_array($1, ','))",
        )
        .bind::<Text, _>(acknowledged.join(","))
        .load::<MessageRow>(&mut sql)
        .expect("reading the acknowledged messages")
        .into_iter()
        .map(|row| (row.id, row.status))
        .collect();
        let missing: Vec<&String> = acknowledged
            .iter()
            .filter(|id| !statuses.contains_key(*id))
            .collect();
        let unsent: Vec<(&String, &String)> = statuses
            .iter()
            .filter(|(_, status)| *status != "sent")
            .collect();
        if (missing.is_empty() && unsent.is_empty())
            || draining.elapsed() > Duration::from_secs(180)
        {
            break (
                missing.into_iter().cloned().collect::<Vec<_>>(),
                unsent.len(),
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(
        missing.is_empty(),
        "{} messages acknowledged as queued are gone after the crash: {:?}",
        missing.len(),
        missing.iter().take(10).collect::<Vec<_>>()
    );
    assert_eq!(
        unsent, 0,
        "acknowledged messages not sent 180 s after the drain"
    );
    deployment.assert_every_message_final().await;

    // The announcement reached every contact; duplicates within the in-flight bound.
    let (announced, receipts): (Vec<_>, Vec<_>) =
        deployment.smtp.messages().into_iter().partition(|message| {
            message
                .recipients
                .iter()
                .all(|recipient| recipient.starts_with("contact-"))
        });
    let announced = Deliveries::of(&announced);
    let receipts = Deliveries::of(&receipts);
    announced.assert_every_contact_reached(contacts, false);
    let duplicates = announced.duplicates() + receipts.duplicates();
    println!(
        "pg_kill: SIGKILL to {killed} PostgreSQL processes after {at_kill} of {contacts} \
         announcement messages had arrived; down {OUTAGE:?}; the API ready {:.1} s and the announcement \
         completed {:.1} s after the restart; {} transactional messages acknowledged ({acknowledged_at_kill} \
         before the kill), {refused} refused or failed; {duplicates} duplicates (bound: \
         {MAX_HELD} in flight)",
        recovered.as_secs_f64(),
        completed_after.as_secs_f64(),
        acknowledged.len(),
    );
    assert!(
        duplicates <= MAX_HELD,
        "{duplicates} duplicates, more than the {MAX_HELD} messages one worker can have in flight"
    );
    assert_eq!(completed["audienceSize"], contacts, "{completed}");
    assert_eq!(
        deployment.message_count("sent").await,
        (contacts + receipts.per_recipient.len()) as u64,
        "every message is sent: the announcement's and each transactional one stored"
    );
    worker.assert_running();
}
