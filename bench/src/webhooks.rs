//! `mailroom-bench webhooks [--events N] [--rate R]`: webhook delivery against a local
//! receiver answering 200, beside the same receiver driven directly by `wrk`.
//!
//! Two runs of N events each (default 10,000):
//! - **burst**: every event is queued first, then the production worker loops drain them;
//!   deliveries per second = N / (last receipt − start of draining);
//! - **paced**: events are queued at R per second (default 1,000, well under the burst
//!   rate) while the workers run; latency = receipt time − queueing time (`occurredAt`).
//!
//! Targets: at least 3,000 deliveries/s, at least half the direct rate, p99
//! latency under 100 ms.

use std::{
    process::Command,
    sync::Arc,
    time::{Duration, Instant, SystemTime},
};

use anyhow::{bail, Context, Result};
use mailroom_app::{
    ports::in_transaction,
    users::{bootstrap_user, BootstrapRequest},
    webhook_events::queue_webhook_event,
    Services,
};
use mailroom_domain::{
    webhook_event::{ContactChange, ContactNotice},
    AccountId, ContactId, Uuid,
};
use mailroom_server::{
    webhook_worker::{WebhookWorker, PARALLEL_ROUNDS},
    Application, Config,
};
use mailroom_test_support::{TestDatabase, TestWebhookReceiver};
use serde_json::{json, Value};
use time::{format_description::well_known::Rfc3339, OffsetDateTime};
use tokio::sync::watch;

use crate::stats::{ms, ratio, thousands, verdict, Latencies};

const USAGE: &str = "\
Usage: mailroom-bench webhooks [--events N] [--rate R]

  webhooks      queue N webhook events (default 10000) for a local receiver that
                answers 200 and time their delivery: a burst (all queued first) for
                deliveries/s, and a paced run at R events/s (default 1000) for the
                latency from queueing to receipt; beside wrk against the receiver.
";

/// Events queued per transaction in the burst.
const QUEUE_BATCH: usize = 500;
/// How long the direct `wrk` run lasts.
const WRK_SECONDS: u64 = 5;

struct Options {
    events: usize,
    rate: u64,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        events: 10_000,
        rate: 1_000,
    };
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number: u64 = value
            .parse()
            .map_err(|_| format!("{flag} needs a whole number, got `{value}`"))?;
        match flag.as_str() {
            "--events" if number >= 100 => options.events = number as usize,
            "--rate" if number >= 10 => options.rate = number,
            "--events" => return Err("--events must be at least 100".into()),
            "--rate" => return Err("--rate must be at least 10".into()),
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    Ok(options)
}

/// Entry point from `main`: parses `args` (after `webhooks`) and runs.
pub fn main(args: &[String]) -> std::process::ExitCode {
    let options = match parse(args) {
        Ok(options) => options,
        Err(message) => {
            eprint!("{USAGE}");
            eprintln!("mailroom-bench: {message}");
            return std::process::ExitCode::from(2);
        }
    };
    crate::run_on_runtime(run(&options))
}

async fn run(options: &Options) -> Result<()> {
    let database = tokio::task::spawn_blocking(TestDatabase::create)
        .await
        .context("creating the database")?;
    let outcome = measure(options, database.url()).await;
    tokio::task::spawn_blocking(move || drop(database)).await?;
    outcome
}

struct Bench {
    services: Services,
    config: Config,
    account: AccountId,
}

async fn measure(options: &Options, url: &str) -> Result<()> {
    let mut config = Config::new(url, [7u8; 32]);
    config.listen = ([127, 0, 0, 1], 0).into();
    config.db_pool_size = 8;
    config.http_workers = 1;
    config.run_workers = false;
    // The benchmarks measure the service, not the rate limit.
    config.rate_limit = None;
    config.allow_private_egress = true;
    let build_config = config.clone();
    let application =
        tokio::task::spawn_blocking(move || Application::build(&build_config)).await??;
    let address = format!("http://127.0.0.1:{}", application.port());
    let services = application.services();
    tokio::spawn(application.run_until_stopped());

    let receiver = Arc::new(TestWebhookReceiver::start());
    let account = set_up_account(&services, &address, &receiver).await?;
    let bench = Bench {
        services,
        config,
        account,
    };

    report!("== Direct: wrk against the receiver ({WRK_SECONDS} s, 2 threads, 64 connections)");
    let direct = direct_rate();
    match direct {
        Some(rate) => report!("  requests/s            {:>12.0}", rate),
        None => report!("  wrk is not installed (apt-get install wrk): no direct rate"),
    }

    report!(
        "\n== Burst: {} events queued, then drained",
        thousands(options.events as u64)
    );
    let queued = Instant::now();
    queue_burst(&bench, options.events).await?;
    report!("  queueing took         {:>12}", ms(queued.elapsed()));
    let (stop, stopped) = watch::channel(false);
    let started = SystemTime::now();
    let workers = start_workers(&bench, stopped);
    let received = wait_for(&receiver, options.events, Duration::from_secs(300)).await?;
    let last = received
        .iter()
        .map(|r| r.received_at)
        .max()
        .unwrap_or(started);
    let drain = last.duration_since(started).unwrap_or_default();
    let burst_rate = options.events as f64 / drain.as_secs_f64();
    report!("  drained in            {:>12}", ms(drain));
    report!("  deliveries/s          {:>12.0}", burst_rate);

    report!(
        "\n== Paced: {} events at {} per second",
        thousands(options.events as u64),
        thousands(options.rate)
    );
    let before = receiver.requests().len();
    queue_paced(&bench, options.events, options.rate).await?;
    let received = wait_for(&receiver, before + options.events, Duration::from_secs(300)).await?;
    let _ = stop.send(true);
    for worker in workers {
        let _ = worker.await;
    }
    let latencies = Latencies::new(
        received[before..]
            .iter()
            .filter_map(|request| {
                let body: Value = serde_json::from_slice(&request.body).ok()?;
                let queued =
                    OffsetDateTime::parse(body["data"]["occurredAt"].as_str()?, &Rfc3339).ok()?;
                let received = OffsetDateTime::from(request.received_at);
                (received - queued).try_into().ok()
            })
            .collect(),
    );
    report!(
        "  samples               {:>12}",
        thousands(latencies.len() as u64)
    );
    for p in [50.0, 90.0, 99.0, 100.0] {
        report!(
            "  p{:<3}                  {:>12}",
            p,
            ms(latencies.percentile(p))
        );
    }

    let p99 = latencies.percentile(99.0);
    report!("\n== Targets ({})", crate::durability::measured_with());
    report!(
        "  ≥ 3,000 deliveries/s  {:>12.0}  {}",
        burst_rate,
        verdict(burst_rate >= 3_000.0)
    );
    match direct {
        Some(rate) => report!(
            "  ≥ 0.5 × direct        {:>12}  {}",
            ratio(burst_rate, rate),
            verdict(burst_rate >= 0.5 * rate)
        ),
        None => report!("  ≥ 0.5 × direct        {:>12}  not measured", "n/a"),
    }
    report!(
        "  p99 < 100 ms          {:>12}  {}",
        ms(p99),
        verdict(p99 < Duration::from_millis(100))
    );
    Ok(())
}

/// A user, an account and a webhook configuration pointing at the receiver, through the
/// API as a customer would set them up.
async fn set_up_account(
    services: &Services,
    address: &str,
    receiver: &TestWebhookReceiver,
) -> Result<AccountId> {
    let bootstrap = BootstrapRequest {
        email: "bench@bench.example".into(),
        token_name: "bench".into(),
        expires_in_days: None,
    };
    let services = services.clone();
    let token = tokio::task::spawn_blocking(move || bootstrap_user(&services, bootstrap))
        .await??
        .token
        .raw
        .expose()
        .to_owned();
    let client = reqwest::Client::new();
    let account: Value = client
        .post(format!("{address}/v2/accounts"))
        .bearer_auth(&token)
        .json(&json!({"name": "Webhook bench"}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let id = account["_id"].as_str().context("account id")?.to_owned();
    client
        .put(format!("{address}/v2/accounts/{id}/webhooks"))
        .bearer_auth(&token)
        .json(&json!({
            "url": receiver.url("/hooks"),
            "authType": "bearer",
            "passwordOrToken": "bench-token",
            "events": ["contact.deleted"],
        }))
        .send()
        .await?
        .error_for_status()?;
    Ok(AccountId::parse(&id)?)
}

fn notice(bench: &Bench, n: usize) -> ContactNotice {
    ContactNotice {
        account_id: bench.account,
        contact_id: ContactId::from_uuid(Uuid::now_v7()),
        email: format!("contact{n}@bench.example"),
        occurred_at: bench.services.clock.now(),
        change: ContactChange::Deleted,
    }
}

/// Queues `count` events through the outbox writer, `QUEUE_BATCH` per transaction.
async fn queue_events(bench: &Bench, from: usize, count: usize) -> Result<()> {
    let services = bench.services.clone();
    let notices: Vec<ContactNotice> = (from..from + count).map(|n| notice(bench, n)).collect();
    tokio::task::spawn_blocking(move || {
        for chunk in notices.chunks(QUEUE_BATCH) {
            in_transaction(services.db.as_ref(), |tx| {
                for notice in chunk {
                    queue_webhook_event(tx, &services, notice)?;
                }
                Ok(())
            })?;
        }
        Ok::<_, mailroom_app::AppError>(())
    })
    .await?
    .map_err(|error| anyhow::anyhow!("queueing: {error}"))
}

async fn queue_burst(bench: &Bench, events: usize) -> Result<()> {
    queue_events(bench, 0, events).await
}

/// Queues `events` at `rate` per second, in ticks of 10 ms.
async fn queue_paced(bench: &Bench, events: usize, rate: u64) -> Result<()> {
    let per_tick = ((rate as f64) / 100.0).ceil().max(1.0) as usize;
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let mut queued = 0;
    while queued < events {
        tick.tick().await;
        let count = per_tick.min(events - queued);
        queue_events(bench, 1_000_000 + queued, count).await?;
        queued += count;
    }
    Ok(())
}

fn start_workers(
    bench: &Bench,
    stopped: watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let worker = WebhookWorker::new(bench.services.clone(), &bench.config);
    (0..PARALLEL_ROUNDS)
        .map(|_| {
            let (worker, stopped) = (worker.clone(), stopped.clone());
            tokio::spawn(async move { worker.run(stopped).await })
        })
        .collect()
}

async fn wait_for(
    receiver: &TestWebhookReceiver,
    count: usize,
    limit: Duration,
) -> Result<Vec<mailroom_test_support::ReceivedRequest>> {
    let started = Instant::now();
    loop {
        let received = receiver.requests();
        if received.len() >= count {
            return Ok(received);
        }
        if started.elapsed() > limit {
            bail!(
                "only {} of {count} deliveries arrived within {} s",
                received.len(),
                limit.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Requests per second of `wrk` against a receiver of its own (so its requests are not
/// mixed with the deliveries); `None` when wrk is not installed.
fn direct_rate() -> Option<f64> {
    let receiver = TestWebhookReceiver::start();
    let output = Command::new("wrk")
        .args([
            "-t2",
            "-c64",
            &format!("-d{WRK_SECONDS}s"),
            &receiver.url("/direct"),
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .find_map(|line| line.trim().strip_prefix("Requests/sec:"))
        .and_then(|rate| rate.trim().parse().ok())
}
