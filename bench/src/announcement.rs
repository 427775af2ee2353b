//! `mailroom-bench announcement [--contacts N]`: an announcement to N contacts (default
//! 1,000,000) with one attribute condition that matches half of them.
//!
//! Measured:
//! - the `POST …/announcements` latency, several times over the full audience (the
//!   request stores a row and answers; nothing scales with the audience);
//! - the audience expansion by the production worker step
//!   (`AnnouncementWorker::run_once`, 5,000 contacts per transaction), from the `POST` to
//!   the last message queued: matching contacts queued per second;
//! - as the reference in the same run, PostgreSQL alone doing the same work in one
//!   statement: the `INSERT … SELECT … ON CONFLICT DO NOTHING` that a single-statement
//!   expansion would run, of the same rows into `messages` itself (so with the same indexes,
//!   the foreign key to `accounts` checked per row; the expansion's upkeep of the delivery
//!   lane and the announcement counters is two small statements per batch, left out
//!   here), emptied first (`TRUNCATE`) as the
//!   expansion found it, for a second announcement, with time-ordered message ids as the
//!   service's UUIDv7 ids are. An earlier reference inserted into `LIKE messages INCLUDING
//!   ALL`, which copies no trigger and no foreign key, with random (v4) ids: it skipped
//!   work the product must do (5,000 foreign-key checks per batch) and did work the product
//!   does not (random inserts into the id indexes).
//!
//! The contacts are written with SQL in bulk (the import endpoint has its own benchmark,
//! `audience`); only the announcement path is timed. Their ids rise with creation, as the
//! service's UUIDv7 ids do, so id order is insertion order as in production.
//!
//! Target: expansion at least 50,000 contacts/s; the `POST` under 100 ms.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use diesel::{connection::SimpleConnection, pg::PgConnection, Connection};
use mailroom_app::users::{bootstrap_user, BootstrapRequest};
use mailroom_server::{announcement_worker::AnnouncementWorker, Application, Config};
use mailroom_test_support::TestDatabase;
use serde_json::{json, Value};

use crate::stats::{ms, ratio, thousands, verdict, Latencies};
use crate::wal::{WalCounters, WalPhase, READING_TRANSACTIONS};

/// How long the in-process server's idle sessions may keep their statistics before
/// reporting them (PostgreSQL's idle flush interval is 10 s), so a reading after this
/// pause has the whole phase.
const STATISTICS_FLUSH: Duration = Duration::from_secs(11);

const USAGE: &str = "\
Usage: mailroom-bench announcement [--contacts N]

  announcement  write N contacts (default 1000000), half with plan=pro, then time
                POST …/announcements (plan s_equal pro) and the expansion of its
                audience into messages, beside one INSERT … SELECT of the same rows
                into messages (same indexes, foreign key and triggers).
";

/// Extra `POST`s timed besides the one that is expanded (they are closed at once).
const POST_SAMPLES: usize = 20;
/// The production batch size.
const BATCH_SIZE: u32 = mailroom_server::announcement_worker::BATCH_SIZE;

struct Options {
    contacts: u64,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        contacts: 1_000_000,
    };
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number: u64 = value
            .parse()
            .map_err(|_| format!("{flag} needs a whole number, got `{value}`"))?;
        match flag.as_str() {
            "--contacts" if number >= 1_000 => options.contacts = number,
            "--contacts" => return Err("--contacts must be at least 1000".into()),
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    Ok(options)
}

/// Entry point from `main`: parses `args` (after `announcement`) and runs.
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

/// Runs `statements` on a connection of its own, on the blocking pool; returns the time.
async fn sql(url: &str, statements: String) -> Result<Duration> {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut conn = PgConnection::establish(&url).context("connecting")?;
        let started = Instant::now();
        conn.batch_execute(&statements)
            .with_context(|| format!("running {statements}"))?;
        Ok(started.elapsed())
    })
    .await?
}

async fn measure(options: &Options, url: &str) -> Result<()> {
    let mut config = Config::new(url, [7u8; 32]);
    config.listen = ([127, 0, 0, 1], 0).into();
    config.db_pool_size = 8;
    config.http_workers = 1;
    config.run_workers = false;
    let build_config = config.clone();
    let application =
        tokio::task::spawn_blocking(move || Application::build(&build_config)).await??;
    let address = format!("http://127.0.0.1:{}", application.port());
    let services = application.services();
    tokio::spawn(application.run_until_stopped());

    let bootstrap_services = services.clone();
    let bootstrapped = tokio::task::spawn_blocking(move || {
        bootstrap_user(
            &bootstrap_services,
            BootstrapRequest {
                email: "bench@bench.example".into(),
                token_name: "bench".into(),
                expires_in_days: None,
            },
        )
    })
    .await??;
    let token = bootstrapped.token.raw.expose().to_owned();
    let client = reqwest::Client::new();
    let post = |path: String, body: Value| {
        let request = client
            .post(format!("{address}{path}"))
            .bearer_auth(&token)
            .json(&body);
        async move {
            let response = request.send().await?;
            let status = response.status();
            let body: Value = response.json().await?;
            ensure!(status == 200, "{path} answered {status}: {body}");
            Ok::<Value, anyhow::Error>(body)
        }
    };
    let account = post("/v2/accounts".into(), json!({"name": "Bench"})).await?["_id"]
        .as_str()
        .context("account id")?
        .to_owned();
    let template = post(
        format!("/v2/accounts/{account}/templates"),
        json!({"name": "Launch", "slug": "launch", "subject": "News",
               "content": format!("<p>{}</p>", "Hello {{ email }}. ".repeat(250))}),
    )
    .await?["_id"]
        .as_str()
        .context("template id")?
        .to_owned();

    report!("Mailroom announcement benchmark");
    report!(
        "  machine: {} cores; server in-process (release), pool 8, workers driven by the bench",
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    let n = options.contacts;
    let loaded = sql(
        url,
        format!(
            "INSERT INTO contacts (account_id, id, email, created_at)
               SELECT '{account}',
                      ('01a00000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
                      'c' || g || '@bench.example',
                      now() - interval '1 day'
               FROM generate_series(1, {n}) g;
             INSERT INTO attribute_metas (account_id, slug, attribute_type, source, created_at,
                                          slot)
               VALUES ('{account}', 'plan', 'string', 'custom', now(), 1);
             INSERT INTO contact_attributes (account_id, contact_id, slug, string_value)
               SELECT account_id, id, 'plan',
                      CASE WHEN split_part(substr(email, 2), '@', 1)::bigint % 2 = 0
                           THEN 'pro' ELSE 'free' END
               FROM contacts WHERE account_id = '{account}';
             INSERT INTO contact_slots (account_id, contact_id, string_1)
               SELECT account_id, contact_id, lower(string_value) FROM contact_attributes
               WHERE account_id = '{account}' AND slug = 'plan';
             ANALYZE contacts;
             ANALYZE contact_attributes;
             ANALYZE contact_slots;"
        ),
    )
    .await?;
    report!(
        "\nSetup: {} contacts, half with plan=pro, written with SQL in {:.1} s",
        thousands(n),
        loaded.as_secs_f64()
    );

    let body = json!({
        "name": "Launch", "templateId": template, "includeUnsubscribed": false,
        "attributes": [{"slug": "plan", "operator": "s_equal", "value": "pro"}]
    });
    let path = format!("/v2/accounts/{account}/announcements");
    let started = Instant::now();
    let created = post(path.clone(), body.clone()).await?;
    let first_post = started.elapsed();
    let announcement = created["_id"].as_str().context("id")?.to_owned();
    let mut samples = vec![first_post];
    let mut other = String::new();
    for _ in 0..POST_SAMPLES {
        let started = Instant::now();
        let sample = post(path.clone(), body.clone()).await?;
        samples.push(started.elapsed());
        other = sample["_id"].as_str().context("id")?.to_owned();
    }
    // Only the first announcement is expanded: the others are closed before any worker.
    sql(
        url,
        format!(
            "UPDATE announcements SET status = 'completed', process_date = now(),
                    expanded_at = now() WHERE id <> '{announcement}'"
        ),
    )
    .await?;

    let mut readings = PgConnection::establish(url).context("connecting for the readings")?;
    tokio::time::sleep(STATISTICS_FLUSH).await;
    let wal_before = WalCounters::read(&mut readings)?;
    let worker = AnnouncementWorker::new(services.clone(), BATCH_SIZE);
    let expanding = Instant::now();
    let mut batches = 0u64;
    let mut queued = 0u64;
    loop {
        let round = worker.run_once().await?;
        let Some(batch) = round.expanded else { break };
        batches += 1;
        queued += batch.queued;
        if batch.finished {
            break;
        }
    }
    // From the POST to the last message queued, leaving out the extra POST samples that
    // ran in between (no worker ran meanwhile).
    let expansion = first_post + expanding.elapsed();
    let expansion_rate = queued as f64 / expansion.as_secs_f64();
    let expanded = expanding.elapsed();
    tokio::time::sleep(STATISTICS_FLUSH).await;
    let mut wal = WalPhase::between(
        wal_before,
        WalCounters::read(&mut readings)?,
        2 * READING_TRANSACTIONS,
    );
    // Rates per second over the expansion itself, not the pause after it.
    wal.elapsed = expanded;

    // The same table, emptied as the expansion found it, one statement for another
    // announcement (the insert alone: the expansion's lane and counter upserts are two
    // small statements per batch).
    // Message ids rise with the contact ids ('01a…' contacts give '01b…' messages), as the
    // expansion's UUIDv7 ids rise: appended to the id indexes, not scattered.
    sql(url, "TRUNCATE messages CASCADE".to_owned()).await?;
    let reference = sql(
        url,
        format!(
            "INSERT INTO messages (account_id, id, contact_id, email, template_id, kind,
                 status, data, attempts, next_attempt_at, message_id_header, created_at,
                 updated_at, announcement_id)
               SELECT c.account_id, m.id, c.id, c.email, '{template}', 'announcement',
                      'queued', '{{}}'::jsonb, 0, now(), '<' || m.id::text || '@bench.example>',
                      now(), now(), '{other}'
               FROM contacts c
               CROSS JOIN LATERAL (SELECT ('01b' || substr(c.id::text, 4))::uuid AS id) m
               WHERE c.account_id = '{account}' AND c.unsubscribed_at IS NULL
                 AND c.created_at <= now()
                 AND EXISTS (SELECT 1 FROM contact_attributes a
                     WHERE a.account_id = c.account_id AND a.contact_id = c.id
                     AND a.slug = 'plan' AND a.string_value IS NOT NULL
                     AND lower(a.string_value) = lower('pro'))
               ON CONFLICT (account_id, announcement_id, contact_id)
                   WHERE announcement_id IS NOT NULL DO NOTHING;"
        ),
    )
    .await?;
    let reference_rate = queued as f64 / reference.as_secs_f64();

    let posts = Latencies::new(samples);
    report!(
        "\nPOST …/announcements over the full audience ({} requests)",
        posts.len()
    );
    report!(
        "  p50 {}, max {} (target < 100 ms: {})",
        ms(posts.percentile(50.0)),
        ms(posts.percentile(100.0)),
        verdict(posts.percentile(100.0) < Duration::from_millis(100))
    );
    report!(
        "\nExpansion (production worker step, {} contacts per batch)",
        thousands(u64::from(BATCH_SIZE))
    );
    report!(
        "  {} messages queued in {batches} batches, {:.2} s after the POST",
        thousands(queued),
        expansion.as_secs_f64()
    );
    report!(
        "  {} contacts/s queued (target ≥ 50,000: {}); {} contacts of the account scanned/s",
        thousands(expansion_rate as u64),
        verdict(expansion_rate >= 50_000.0),
        thousands((n as f64 / expansion.as_secs_f64()) as u64)
    );
    report!(
        "  reference, one INSERT … SELECT … ON CONFLICT into messages: {:.2} s, {} rows/s",
        reference.as_secs_f64(),
        thousands(reference_rate as u64)
    );
    report!(
        "  ratio to the reference: {}",
        ratio(expansion_rate, reference_rate)
    );
    report!(
        "  the expansion's commits and WAL (worker steps only; {}):",
        crate::durability::measured_with()
    );
    wal.print(queued, "message");
    ensure!(
        queued == n / 2,
        "expected {} messages, queued {queued}",
        n / 2
    );
    Ok(())
}
