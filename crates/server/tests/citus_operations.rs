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
use mailroom_test_support::{on_citus, TestSmtpOptions, TestSmtpServer};
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
    fn start(deployment: &Deployment, account: &str) -> Self {
        let running = Arc::new(AtomicBool::new(true));
        let answers = Arc::new(Mutex::new(EventAnswers::default()));
        let url = format!("{}/v2/accounts/{account}/events", deployment.base);
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

    let events = EventLoad::start(&deployment, &deployment.account);
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
/// (`MAILROOM_CITUS_ISOLATE_CONTACTS` overrides) is delivered and events arrive. Both
/// steps copy with `block_writes`: the tenant's writes wait for the copy (503 with
/// `Retry-After` past the statement timeout). The logical-replication mode had not caught
/// up with the tenant's own writes after 7 minutes on a 2-core machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_tenant_gets_a_shard_and_a_node_of_its_own_while_it_sends() {
    if !on_citus() {
        return;
    }
    let contacts = count_from_env("MAILROOM_CITUS_ISOLATE_CONTACTS", 5_000);
    let (deployment, mut worker_a, mut worker_b, id) = sending("citus_isolate", contacts).await;

    let events = EventLoad::start(&deployment, &deployment.account);
    let (host, port) = deployment.database.add_spare_node();
    let url = deployment.database.url().to_owned();
    let account = deployment.account.clone();
    let started = Instant::now();
    let on_new_node = blocking_sql(url, move |conn| {
        let shard = count(
            conn,
            &format!(
                "SELECT isolate_tenant_to_new_shard('accounts', '{account}'::uuid, 'CASCADE', \
                 shard_transfer_mode => 'block_writes') AS count"
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
            "SELECT citus_move_shard_placement({shard}, '127.0.0.1', {source}, '{host}', {port}, \
             shard_transfer_mode => 'block_writes')"
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

/// How long the node stays away.
const AWAY: Duration = Duration::from_secs(30);

/// One tenant's shards live alone on a node of their own (the spare node, added for them),
/// the other tenant's on the cluster's two workers. Both announce to `contacts` contacts
/// (`MAILROOM_CITUS_AWAY_CONTACTS` overrides) through two workers, each to its own SMTP
/// server, and the node stops (fast shutdown) for 30 s in the middle. While it is away the
/// other tenant keeps sending and its events are recorded, and the away tenant's API
/// answers 503 with `Retry-After`; once it is back, both announcements complete with
/// every contact reached and duplicates within what was in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_away_for_30_s_holds_up_only_the_tenant_on_it_and_nothing_is_lost() {
    if !on_citus() {
        return;
    }
    let contacts = count_from_env("MAILROOM_CITUS_AWAY_CONTACTS", 3_000);
    let slow_smtp = || TestSmtpOptions {
        accept_delay: Some(Duration::from_millis(40)),
        ..TestSmtpOptions::default()
    };
    let deployment = Deployment::start("citus_node_away", slow_smtp()).await;
    let away = deployment.tenant();
    let other_smtp = TestSmtpServer::start(slow_smtp());
    let other = deployment.add_tenant("Beta", other_smtp.port()).await;

    // The away tenant's rows get shards of their own, moved to the spare node (both while
    // the tenant holds only its starter data: writes wait for a moment, nothing else).
    let (host, port) = deployment.database.add_spare_node();
    let (away_account, other_account) = (away.account.clone(), other.account.clone());
    blocking_sql(deployment.database.url().to_owned(), move |conn| {
        let shard = count(
            conn,
            &format!(
                "SELECT isolate_tenant_to_new_shard('accounts', '{away_account}'::uuid, \
                 'CASCADE', shard_transfer_mode => 'block_writes') AS count"
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
            "SELECT citus_move_shard_placement({shard}, '127.0.0.1', {source}, '{host}', \
             {port}, shard_transfer_mode => 'block_writes')"
        ))
        .expect("moving the away tenant's shards to the spare node");
        let other_on_spare = count(
            conn,
            &format!(
                "SELECT count(*) AS count FROM pg_dist_placement p \
                 JOIN pg_dist_node n ON n.groupid = p.groupid \
                 WHERE p.shardid = get_shard_id_for_distribution_column('accounts', \
                       '{other_account}'::uuid) AND n.nodeport = {port}"
            ),
        );
        assert_eq!(
            other_on_spare, 0,
            "the other tenant's shard is on the spare node"
        );
    })
    .await;

    deployment.import_contacts_of(&away, contacts).await;
    deployment.import_contacts_of(&other, contacts).await;
    let mut worker_a = deployment.start_worker("worker-a").await;
    let mut worker_b = deployment.start_worker("worker-b").await;
    let away_id = deployment.announce_of(&away).await;
    let other_id = deployment.announce_of(&other).await;
    // Both announcements expanded (the expansion's candidates are read from every node)
    // and sending before the node goes.
    let started = Instant::now();
    loop {
        let expanded = [(&away, &away_id), (&other, &other_id)];
        let mut all = true;
        for (tenant, id) in expanded {
            all &= deployment.announcement_of(tenant, id).await["audienceSize"] == contacts;
        }
        if all && deployment.smtp.message_count() >= contacts / 10 {
            break;
        }
        worker_a.assert_running();
        worker_b.assert_running();
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "the announcements were not expanded and sending within 300 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let events = EventLoad::start(&deployment, &other.account);
    let stopped = tokio::task::spawn_blocking(mailroom_test_support::stop_spare_node)
        .await
        .expect("stopping the spare node");
    let (away_before, other_before) = (deployment.smtp.message_count(), other_smtp.message_count());
    // The away tenant's API, asked throughout: 503 with Retry-After, nothing else.
    let mut away_answers = Vec::new();
    let away_url = format!(
        "{}/v2/accounts/{}/announcements/{away_id}",
        deployment.base, away.account
    );
    let gone = Instant::now();
    while gone.elapsed() < AWAY {
        let response = deployment
            .http
            .get(&away_url)
            .bearer_auth(&deployment.token)
            .send()
            .await
            .expect("GET the away tenant's announcement");
        let retry_after = response.headers().contains_key("retry-after");
        away_answers.push((response.status().as_u16(), retry_after));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (away_during, other_during) = (
        deployment.smtp.message_count() - away_before,
        other_smtp.message_count() - other_before,
    );
    let answers = events.stop().await;
    tokio::task::spawn_blocking(move || stopped.start())
        .await
        .expect("starting the spare node");
    println!(
        "node away for {AWAY:?}: the tenant on it received {away_during} messages meanwhile \
         (sessions already open), the other tenant {other_during} ({other_before} before); \
         the other tenant's events: {} answered 2xx, {} 503 with Retry-After; the away \
         tenant's API answered {} times, {} of them 503 with Retry-After",
        answers.ok,
        answers.retry_later,
        away_answers.len(),
        away_answers
            .iter()
            .filter(|&&(status, retry_after)| status == 503 && retry_after)
            .count()
    );
    assert!(
        away_answers
            .iter()
            .all(|&(status, retry_after)| status == 503 && retry_after),
        "the away tenant's API answered other than 503 with Retry-After: {away_answers:?}"
    );
    assert!(
        away_during <= IN_FLIGHT,
        "the away tenant received {away_during} messages while its node was away, more than \
         the {IN_FLIGHT} that can be in flight"
    );
    let other_left = contacts.saturating_sub(other_before);
    assert!(
        other_during >= other_left.min(100),
        "the other tenant received only {other_during} messages while the node was away \
         ({other_left} were left)"
    );

    for (tenant, id, smtp) in [
        (&away, &away_id, &deployment.smtp),
        (&other, &other_id, &other_smtp),
    ] {
        let announcement = deployment
            .wait_for_completion_of(
                tenant,
                id,
                &mut [&mut worker_a, &mut worker_b],
                Duration::from_secs(600),
            )
            .await;
        assert_eq!(announcement["audienceSize"], contacts, "{announcement}");
        let deliveries = Deliveries::of(&smtp.messages());
        deliveries.assert_every_contact_reached(contacts, false);
        assert!(
            deliveries.duplicates() <= IN_FLIGHT,
            "{} duplicates, more than the {IN_FLIGHT} messages in flight",
            deliveries.duplicates()
        );
        deployment.assert_every_message_final_of(tenant).await;
    }
    assert!(
        answers.other.is_empty(),
        "the other tenant's events were answered other than 2xx or 503: {:?}",
        answers.other
    );
    assert!(answers.ok > 0, "no event of the other tenant was recorded");
    assert!(
        answers.retry_later * 100 <= answers.ok,
        "{} of the other tenant's events were answered 503 while the node was away ({} 2xx): \
         its own shards were all there",
        answers.retry_later,
        answers.ok
    );
}
