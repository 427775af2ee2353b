//! Event recording under load: `POST …/events` from concurrent keep-alive clients, and
//! `pgbench` running the statements the API runs for one event, as the ceiling the
//! database allows on this machine.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};

use crate::{
    data::{self, EVENT_SLUGS},
    stats::Latencies,
};

/// Concurrent clients, for the API and for pgbench alike.
pub const CLIENTS: usize = 32;

/// Whose events are recorded.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// Contacts of the imported audience.
    Known,
    /// A new contact for every event.
    New,
}

impl Audience {
    pub fn label(self) -> &'static str {
        match self {
            Self::Known => "known contacts",
            Self::New => "new contacts",
        }
    }
}

/// What a run measured.
pub struct Throughput {
    pub ok: u64,
    pub failed: u64,
    pub per_second: f64,
    pub latencies: Latencies,
}

/// Where the API is and who calls it.
pub struct Target {
    pub address: String,
    pub token: String,
    pub account: String,
    pub contacts: u64,
}

/// Records events from [`CLIENTS`] clients, each with its own keep-alive connection,
/// for `duration`; requests in flight at the end are waited for and counted.
pub async fn api_run(
    target: &Target,
    audience: Audience,
    duration: Duration,
) -> Result<Throughput> {
    let url = format!("{}/v2/accounts/{}/events", target.address, target.account);
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::with_capacity(CLIENTS);
    for client_number in 0..CLIENTS as u64 {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .timeout(Duration::from_secs(30))
            .build()?;
        let (url, token, contacts) = (url.clone(), target.token.clone(), target.contacts);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut failed = 0u64;
            let mut sequence = 0u64;
            while Instant::now() < deadline {
                sequence += 1;
                let draw = data::mix(client_number << 40 | sequence);
                let email = match audience {
                    Audience::Known => data::email(draw % contacts),
                    Audience::New => format!("new-{client_number}-{sequence}@bench.example"),
                };
                let slug = EVENT_SLUGS[(draw >> 32) as usize % EVENT_SLUGS.len()];
                let body = serde_json::json!({ "email": email, "slug": slug }).to_string();
                let sent = Instant::now();
                let outcome = client
                    .post(&url)
                    .bearer_auth(&token)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await;
                // The body is read so the connection goes back to the pool for the next one.
                let ok = match outcome {
                    Ok(response) => {
                        response.status().is_success() && response.bytes().await.is_ok()
                    }
                    Err(_) => false,
                };
                if ok {
                    latencies.push(sent.elapsed());
                } else {
                    failed += 1;
                }
            }
            (latencies, failed)
        }));
    }
    let mut latencies = Vec::new();
    let mut failed = 0;
    for task in tasks {
        let (mut more, more_failed) = task.await?;
        latencies.append(&mut more);
        failed += more_failed;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let ok = latencies.len() as u64;
    Ok(Throughput {
        ok,
        failed,
        per_second: ok as f64 / elapsed,
        latencies: Latencies::new(latencies),
    })
}

/// What pgbench reported.
pub struct PgbenchRun {
    pub tps: f64,
    pub failed: u64,
    /// Every transaction's latency, from pgbench's per-transaction log (`--log`), so its
    /// tail can stand beside the API's.
    pub latencies: Latencies,
}

/// The identities the script's statements use.
pub struct ScriptVariables {
    pub account: String,
    pub user: String,
    pub token_hash_hex: String,
}

/// The statements of one `POST …/events` in steady state, as the code runs them now
/// (`crates/app/src/contacts/record_event.rs` and `ContactRepository::record_event` in
/// `crates/postgres/src/repositories/contacts.rs`):
///
/// - authentication: none; the token is in the process's token cache (its `lastUsedAt`
///   is written once a minute, which is noise at this rate);
/// - the membership check: none; the membership is in the process's membership cache
///   (`crates/app/src/auth.rs`, 5 s);
/// - the event: one statement outside a transaction (no automation listens to the
///   bench's slugs and the events carry no attributes): whether an enabled automation
///   listens to the slug, then, since none does, the contact found by email or inserted,
///   the event attribute's meta inserted only when missing, the event row, its name's
///   count increment and the `event.<slug>` date attribute.
///
/// The server's sessions carry the request statement timeout (set when a connection
/// opens), so the statement needs no `BEGIN; SET LOCAL`; pgbench's sessions get the same
/// timeout from `PGOPTIONS`. One statement, one round trip, for both. Ids are
/// time-ordered like the API's UUIDv7, so both write the same index pattern.
fn script(audience: Audience) -> String {
    let time_ordered_id =
        "(lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') || substr(md5(random()::text), 1, 20))::uuid";
    let (draw, email) = match audience {
        Audience::Known => (
            "\\set n random(0, :contacts - 1)",
            "'user' || :n::text || '@bench.example'",
        ),
        Audience::New => (
            "\\set n random(1, 9000000000000000000)",
            "'pgbench-' || :client_id::text || '-' || :n::text || '@bench.example'",
        ),
    };
    let slug = "(ARRAY['signed_up', 'opened_email', 'purchased'])[:k]";
    let event = format!(
        "WITH listening AS (SELECT EXISTS (SELECT 1 FROM automations WHERE account_id = :account AND trigger_event_slug = {slug} AND is_enabled) AS yes), inserted AS (INSERT INTO contacts (account_id, id, email, created_at) SELECT :account, {time_ordered_id}, {email}, now() WHERE NOT (TRUE AND (SELECT yes FROM listening)) ON CONFLICT (account_id, email_lower) DO NOTHING RETURNING id), contact AS (SELECT id, TRUE AS created FROM inserted UNION ALL SELECT id, FALSE AS created FROM contacts WHERE account_id = :account AND email_lower = lower({email}) AND NOT (TRUE AND (SELECT yes FROM listening)) AND NOT EXISTS (SELECT 1 FROM inserted) LIMIT 1), meta AS (INSERT INTO attribute_metas (account_id, slug, attribute_type, source, created_at) SELECT :account, 'event.' || {slug}, 'date', 'event', now() FROM contact WHERE NOT EXISTS (SELECT 1 FROM attribute_metas WHERE account_id = :account AND slug = 'event.' || {slug}) ON CONFLICT (account_id, slug) DO NOTHING), event AS (INSERT INTO contact_events (account_id, id, contact_id, slug, occurred_at) SELECT :account, {time_ordered_id}, id, {slug}, now() FROM contact), increment AS (INSERT INTO contact_event_increments (account_id, slug, count, last_seen) SELECT :account, {slug}, 1, now() FROM contact), latest AS (INSERT INTO contact_attributes (account_id, contact_id, slug, date_value) SELECT :account, id, 'event.' || {slug}, now() FROM contact ON CONFLICT (account_id, contact_id, slug) DO UPDATE SET date_value = GREATEST(contact_attributes.date_value, excluded.date_value)) SELECT contact.id, listening.yes AS triggers FROM listening LEFT JOIN contact ON TRUE;"
    );
    format!(
        "{draw}
\\set k random(1, 3)
{event}
"
    )
}

/// Writes the script for `audience` next to the other temporary files and returns its path.
pub fn write_script(audience: Audience) -> Result<PathBuf> {
    let name = match audience {
        Audience::Known => "known",
        Audience::New => "new",
    };
    let path = std::env::temp_dir().join(format!(
        "mailroom-bench-events-{name}-{}.sql",
        std::process::id()
    ));
    std::fs::write(&path, script(audience))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// Runs pgbench with [`CLIENTS`] clients for `duration` on `script` (prepared statements,
/// as diesel uses) and reads its summary.
pub fn pgbench_run(
    pgbench: &Path,
    database_url: &str,
    script: &Path,
    variables: &ScriptVariables,
    contacts: u64,
    duration: Duration,
) -> Result<PgbenchRun> {
    // pgbench writes its per-transaction log as `<prefix>.<pid>[.<thread>]` in its working
    // directory; a directory of our own keeps the files together and apart from others.
    let log_dir = std::env::temp_dir().join(format!(
        "mailroom-bench-pgbench-{}-{}",
        std::process::id(),
        script
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_default()
    ));
    std::fs::create_dir_all(&log_dir).with_context(|| format!("creating {}", log_dir.display()))?;
    let output = Command::new(pgbench)
        .current_dir(&log_dir)
        // The request pool's statement timeout (see `script`).
        .env("PGOPTIONS", "-c statement_timeout=15000")
        .args(["--no-vacuum", "--protocol=prepared", "--jobs=2", "--log"])
        .arg("--log-prefix=transactions")
        .arg(format!("--client={CLIENTS}"))
        .arg(format!("--time={}", duration.as_secs().max(1)))
        .arg(format!("--file={}", script.display()))
        .arg(format!("--define=account={}", variables.account))
        .arg(format!("--define=user={}", variables.user))
        .arg(format!("--define=token_hash={}", variables.token_hash_hex))
        .arg(format!("--define=contacts={contacts}"))
        .arg(database_url)
        .output()
        .with_context(|| format!("running {}", pgbench.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!(
            "pgbench failed ({}):\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let number_after = |prefix: &str| {
        stdout
            .lines()
            .find_map(|line| line.trim().strip_prefix(prefix))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|number| number.parse::<f64>().ok())
    };
    let latencies = transaction_latencies(&log_dir);
    let _ = std::fs::remove_dir_all(&log_dir);
    Ok(PgbenchRun {
        tps: number_after("tps = ")
            .with_context(|| format!("no tps in pgbench's output:\n{stdout}"))?,
        failed: number_after("number of failed transactions: ").map_or(0, |n| n as u64),
        latencies: latencies?,
    })
}

/// The latencies of pgbench's per-transaction log files in `dir`: each line is
/// `client transaction latency_us script epoch epoch_us` (failed transactions write
/// `failed` or `serialization`… in the latency field and are left out).
fn transaction_latencies(dir: &Path) -> Result<Latencies> {
    let mut samples = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        samples.extend(text.lines().filter_map(|line| {
            let micros: u64 = line.split_whitespace().nth(2)?.parse().ok()?;
            Some(Duration::from_micros(micros))
        }));
    }
    if samples.is_empty() {
        bail!(
            "pgbench's per-transaction log in {} is empty",
            dir.display()
        );
    }
    Ok(Latencies::new(samples))
}
