//! Live operations on a Citus cluster while mail flows (`cargo xtask test --citus`; off
//! Citus each test returns at once): shards rebalanced onto a node added during an
//! announcement, and the largest tenant isolated into a shard of its own and moved. Each
//! starts an API-only `mailroom serve` and two `mailroom worker` processes, as
//! `processes.rs` does, and keeps `POST …/events` busy throughout.
//!
//! What must hold, as for a crash: every message ends final, every contact receives the
//! announcement, duplicates stay within what the workers can have in flight, and the API
//! answers every request, with a 5xx only as a 503 that carries `Retry-After` (a statement
//! that waited past the statement timeout behind a shard's move). docs/operations.md
//! ("Running on Citus") gives the procedures as the operator runs them.

mod support;

use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc, Mutex,
};
use std::time::{Duration, Instant};

use diesel::{
    connection::SimpleConnection, pg::PgConnection, sql_query, sql_types::BigInt, QueryableByName,
    RunQueryDsl,
};
use mailroom_server::message_worker::MAX_HELD;
use mailroom_test_support::{on_citus, TestSmtpOptions};
use serde_json::json;
use support::{count_from_env, Deliveries, Deployment};

/// Two worker processes, each with at most this many messages in flight.
const IN_FLIGHT: usize = 2 * MAX_HELD;

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    count: i64,
}

fn count(conn: &mut PgConnection, sql: &str) -> i64 {
    sql_query(sql)
        .get_result::<Count>(conn)
        .unwrap_or_else(|error| panic!("{sql}: {error}"))
        .count
}

/// What `POST …/events` answered while the cluster was changed under it.
#[derive(Default, Debug)]
struct EventAnswers {
    ok: usize,
    /// 503 with `Retry-After`: a statement that waited past the timeout, documented.
    retry_later: usize,
    /// Anything else: the test fails on any.
    other: Vec<String>,
}

/// Events posted one after another until stopped, each to a new contact.
struct EventLoad {
    running: Arc<AtomicBool>,
    answers: Arc<Mutex<EventAnswers>>,
    task: tokio::task::JoinHandle<()>,
}

impl EventLoad {
    fn start(deployment: &Deployment) -> Self {
        let running = Arc::new(AtomicBool::new(true));
        let answers = Arc::new(Mutex::new(EventAnswers::default()));
        let url = format!(
            "{}/v2/accounts/{}/events",
            deployment.base, deployment.account
        );
        let (http, token) = (deployment.http.clone(), deployment.token.clone());
        let task = tokio::spawn({
            let (running, answers) = (running.clone(), answers.clone());
            async move {
                let mut number = 0u64;
                while running.load(Ordering::Relaxed) {
                    number += 1;
                    let response = http
                        .post(&url)
                        .bearer_auth(&token)
                        .json(&json!({"email": format!("visitor{number}@example.org"), "slug": "visited"}))
                        .send()
                        .await;
                    let outcome = match response {
                        Ok(response) if response.status().is_success() => Ok(true),
                        Ok(response)
                            if response.status() == 503
                                && response.headers().contains_key("retry-after") =>
                        {
                            Ok(false)
                        }
                        Ok(response) => Err(response.status().to_string()),
                        Err(error) => Err(error.to_string()),
                    };
                    {
                        let mut answers = answers.lock().expect("answers");
                        match outcome {
                            Ok(true) => answers.ok += 1,
                            Ok(false) => answers.retry_later += 1,
                            Err(what) => answers.other.push(what),
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        });
        EventLoad {
            running,
            answers,
            task,
        }
    }

    async fn stop(self) -> EventAnswers {
        self.running.store(false, Ordering::Relaxed);
        self.task.await.expect("the event load");
        std::mem::take(&mut *self.answers.lock().expect("answers"))
    }
}

/// Runs blocking SQL of the test (a rebalance waits minutes) off the runtime's threads.
async fn blocking_sql<T: Send + 'static>(
    url: String,
    work: impl FnOnce(&mut PgConnection) -> T + Send + 'static,
) -> T {
    tokio::task::spawn_blocking(move || {
        work(&mut mailroom_test_support::assertion_connection(&url))
    })
    .await
    .expect("blocking SQL")
}

/// A deployment with two workers delivering an announcement to `contacts` contacts, a
/// tenth of them delivered already; the SMTP server takes 20 ms a message, so delivery
/// goes on while the cluster changes.
async fn sending(
    test: &str,
    contacts: usize,
) -> (Deployment, support::Process, support::Process, String) {
    let deployment = Deployment::start(
        test,
        TestSmtpOptions {
            accept_delay: Some(Duration::from_millis(20)),
            ..TestSmtpOptions::default()
        },
    )
    .await;
    let mut worker_a = deployment.start_worker("worker-a").await;
    let mut worker_b = deployment.start_worker("worker-b").await;
    deployment.import_contacts(contacts).await;
    let id = deployment.announce().await;
    deployment
        .wait_for_deliveries(
            contacts / 10,
            &mut [&mut worker_a, &mut worker_b],
            Duration::from_secs(300),
        )
        .await;
    (deployment, worker_a, worker_b, id)
}

/// The checks every live operation ends with.
async fn assert_nothing_lost(
    deployment: &Deployment,
    id: &str,
    contacts: usize,
    workers: &mut [&mut support::Process],
    answers: &EventAnswers,
    what: &str,
) {
    let announcement = deployment
        .wait_for_completion(id, workers, Duration::from_secs(900))
        .await;
    let deliveries = Deliveries::of(&deployment.smtp.messages());
    let duplicates = deliveries.duplicates();
    println!(
        "{what}: {contacts} contacts, {} deliveries, {duplicates} duplicates (at most {IN_FLIGHT} in flight); \
         events during it: {} answered 2xx, {} answered 503 with Retry-After",
        deliveries.total, answers.ok, answers.retry_later
    );
    assert!(
        answers.other.is_empty(),
        "{what}: the API answered other than 2xx or 503 with Retry-After: {:?}",
        answers.other
    );
    assert!(answers.ok > 0, "{what}: no event was recorded during it");
    deliveries.assert_every_contact_reached(contacts, false);
    assert!(
        duplicates <= IN_FLIGHT,
        "{what}: {duplicates} duplicates, more than the {IN_FLIGHT} messages in flight"
    );
    assert_eq!(announcement["audienceSize"], contacts, "{announcement}");
    deployment.assert_every_message_final().await;
    assert_eq!(deployment.message_count("sent").await, contacts as u64);
}

/// A third node joins the cluster while an announcement to 20,000 contacts
/// (`MAILROOM_CITUS_REBALANCE_CONTACTS` overrides) is delivered through two workers, and
/// `citus_rebalance_start()` moves shards onto it (logical replication; reference tables
/// copied first) while events keep arriving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_move_to_a_new_node_while_an_announcement_is_delivered_and_nothing_is_lost() {
    if !on_citus() {
        return;
    }
    let contacts = count_from_env("MAILROOM_CITUS_REBALANCE_CONTACTS", 20_000);
    let (deployment, mut worker_a, mut worker_b, id) = sending("citus_rebalance", contacts).await;

    let events = EventLoad::start(&deployment);
    let before = deployment.smtp.message_count();
    let (_, port) = deployment.database.add_spare_node();
    let url = deployment.database.url().to_owned();
    let started = Instant::now();
    let moved = blocking_sql(url, move |conn| {
        // Two statements, two transactions: the job `citus_rebalance_start` schedules is
        // seen by the background executor only once committed.
        conn.batch_execute("SELECT citus_rebalance_start()")
            .expect("starting the rebalance");
        conn.batch_execute("SELECT citus_rebalance_wait()")
            .expect("waiting for the rebalance");
        count(
            conn,
            &format!(
                "SELECT count(*) AS count FROM pg_dist_placement p \
                 JOIN pg_dist_node n ON n.groupid = p.groupid \
                 JOIN pg_dist_shard s ON s.shardid = p.shardid \
                 JOIN pg_dist_partition t ON t.logicalrelid = s.logicalrelid \
                 WHERE n.nodeport = {port} AND t.partmethod = 'h'"
            ),
        )
    })
    .await;
    let took = started.elapsed();
    let during = deployment.smtp.message_count();
    let answers = events.stop().await;
    println!(
        "rebalance: {moved} shards on the new node after {:.1} s; {} of {contacts} messages arrived during it ({before} before)",
        took.as_secs_f64(),
        during - before
    );
    assert!(moved > 0, "the rebalance moved no shard to the new node");
    assert!(
        during > before,
        "no message arrived while the shards moved ({before} before, {during} after)"
    );
    assert_nothing_lost(
        &deployment,
        &id,
        contacts,
        &mut [&mut worker_a, &mut worker_b],
        &answers,
        "rebalance",
    )
    .await;
}

/// The account's tenant is isolated into shards of its own
/// (`isolate_tenant_to_new_shard(…, 'CASCADE')`, every co-located table) and those are
/// moved to a node added for it, while its announcement to 5,000 contacts
/// (`MAILROOM_CITUS_ISOLATE_CONTACTS` overrides) is delivered and events arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the split's logical replication had not caught up with the tenant's writes after \
            7 minutes on a 2-core machine; run with `--run-ignored only` (docs/operations.md)"]
async fn the_largest_tenant_gets_a_shard_and_a_node_of_its_own_while_it_sends() {
    if !on_citus() {
        return;
    }
    let contacts = count_from_env("MAILROOM_CITUS_ISOLATE_CONTACTS", 5_000);
    let (deployment, mut worker_a, mut worker_b, id) = sending("citus_isolate", contacts).await;

    let events = EventLoad::start(&deployment);
    let (host, port) = deployment.database.add_spare_node();
    let url = deployment.database.url().to_owned();
    let account = deployment.account.clone();
    let started = Instant::now();
    let on_new_node = blocking_sql(url, move |conn| {
        let shard = count(
            conn,
            &format!(
                "SELECT isolate_tenant_to_new_shard('accounts', '{account}'::uuid, 'CASCADE') AS count"
            ),
        );
        let source = count(
            conn,
            &format!(
                "SELECT n.nodeport::bigint AS count FROM pg_dist_placement p \
                 JOIN pg_dist_node n ON n.groupid = p.groupid WHERE p.shardid = {shard}"
            ),
        );
        conn.batch_execute(&format!(
            "SELECT citus_move_shard_placement({shard}, '127.0.0.1', {source}, '{host}', {port})"
        ))
        .expect("moving the tenant's shard");
        count(
            conn,
            &format!(
                "SELECT count(*) AS count FROM pg_dist_placement p \
                 JOIN pg_dist_node n ON n.groupid = p.groupid \
                 WHERE p.shardid = {shard} AND n.nodeport = {port}"
            ),
        )
    })
    .await;
    let took = started.elapsed();
    let answers = events.stop().await;
    println!(
        "tenant isolation: the account's shard isolated and moved in {:.1} s",
        took.as_secs_f64()
    );
    assert_eq!(on_new_node, 1, "the tenant's shard is not on the new node");
    assert_nothing_lost(
        &deployment,
        &id,
        contacts,
        &mut [&mut worker_a, &mut worker_b],
        &answers,
        "tenant isolation",
    )
    .await;
}
