//! `mailroom-bench conversion [--contacts N]`: converting a schema that holds data to
//! Citus, as an operator who outgrew one server would: `mailroom migrate` on the
//! coordinator after the extension is created, timed, with what it locks meanwhile.
//!
//! `cargo xtask bench conversion` runs it on the test cluster (`cargo xtask citus`). The
//! database is made plain on the coordinator (the migrations run before the extension
//! exists, so nothing is distributed), one account is given N contacts with two
//! attributes each (and their slots), two events and one sent message each, in bulk SQL;
//! then the extension is created, the workers registered, and the migrations run again,
//! which distribute every table (crates/postgres/src/citus.rs). Meanwhile two probes on
//! connections of their own read and write one contact every 100 ms with a lock timeout
//! of 200 ms, and a sampler notes the lock modes held on `contacts`, so the report says
//! what an application would have met during the conversion.

use std::{
    collections::BTreeSet,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use diesel::{
    connection::SimpleConnection, pg::PgConnection, sql_query, sql_types::BigInt, sql_types::Text,
    Connection, QueryableByName, RunQueryDsl,
};
use mailroom_postgres::run_migrations;
use mailroom_test_support::{citus_workers, on_citus, register_citus_workers, TestDatabase};

use crate::stats::thousands;

const USAGE: &str = "Usage: mailroom-bench conversion [--contacts N]  (N ≥ 1000, default 1000000)";

pub fn main(args: &[String]) -> std::process::ExitCode {
    let mut contacts: u64 = 1_000_000;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        match (
            flag.as_str(),
            rest.next().and_then(|value| value.parse().ok()),
        ) {
            ("--contacts", Some(number)) if number >= 1_000 => contacts = number,
            _ => {
                eprintln!("{USAGE}");
                return std::process::ExitCode::from(2);
            }
        }
    }
    crate::run_on_runtime(run(contacts))
}

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = Text)]
    value: String,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

async fn run(contacts: u64) -> Result<()> {
    if !on_citus() {
        bail!("the conversion is measured on a Citus cluster: run `cargo xtask bench conversion`");
    }
    let database = tokio::task::spawn_blocking(TestDatabase::create_unregistered).await?;
    let outcome = measure(contacts, database.url()).await;
    tokio::task::spawn_blocking(move || drop(database)).await?;
    outcome
}

async fn measure(contacts: u64, url: &str) -> Result<()> {
    let workers = citus_workers();
    report!(
        "== Converting a schema with {} contacts to Citus (coordinator and {} workers on this machine)",
        thousands(contacts),
        workers.len()
    );
    let migrate_url = url.to_owned();
    tokio::task::spawn_blocking(move || run_migrations(&migrate_url)).await??;
    // One account with a template, made as the API makes them.
    let api = crate::delivery::Api::start(url).await?;
    let account = api
        .post(
            "/v2/accounts".into(),
            serde_json::json!({"name": "Conversion bench"}),
        )
        .await?["_id"]
        .as_str()
        .context("the account's id")?
        .to_owned();
    let mut sql = PgConnection::establish(url)?;
    // One of the starter templates every new account has.
    let template = sql_query(format!(
        "SELECT id::text AS value FROM templates WHERE account_id = '{account}' LIMIT 1"
    ))
    .get_result::<Row>(&mut sql)
    .context("a starter template")?
    .value;
    let started = Instant::now();
    sql.batch_execute(&format!(
        "INSERT INTO contacts (account_id, id, email, created_at, message_count)
             SELECT '{account}', gen_random_uuid(), 'c' || n || '@conversion.example', now(), 1
             FROM generate_series(1, {contacts}) AS n;
         INSERT INTO attribute_metas (account_id, slug, attribute_type, source, created_at, slot)
             VALUES ('{account}', 'plan', 'string', 'custom', now(), 1),
                    ('{account}', 'score', 'number', 'custom', now(), 1);
         INSERT INTO contact_attributes (account_id, contact_id, slug, string_value)
             SELECT account_id, id, 'plan', (ARRAY['free', 'pro', 'team'])[1 + abs(hashtext(email)) % 3]
             FROM contacts WHERE account_id = '{account}';
         INSERT INTO contact_attributes (account_id, contact_id, slug, number_value)
             SELECT account_id, id, 'score', abs(hashtext(email)) % 1000
             FROM contacts WHERE account_id = '{account}';
         INSERT INTO contact_slots (account_id, contact_id, string_1, number_1)
             SELECT account_id, id, (ARRAY['free', 'pro', 'team'])[1 + abs(hashtext(email)) % 3],
                    abs(hashtext(email)) % 1000
             FROM contacts WHERE account_id = '{account}';
         INSERT INTO contact_events (account_id, id, contact_id, slug, occurred_at)
             SELECT account_id, gen_random_uuid(), id, slug, now()
             FROM contacts, unnest(ARRAY['signup', 'login']) AS slug WHERE account_id = '{account}';
         INSERT INTO messages (account_id, id, contact_id, email, template_id, kind, status, data,
                               message_id_header, created_at, updated_at, sent_at)
             SELECT account_id, message, id, email, '{template}', 'transactional', 'sent',
                    '{{}}'::jsonb, '<' || message || '@conversion.example>', now(), now(), now()
             FROM (SELECT account_id, gen_random_uuid() AS message, id, email
                   FROM contacts WHERE account_id = '{account}') AS c;"
    ))
    .context("loading the data")?;
    // Apart: VACUUM refuses to run in the transaction a multi-statement batch is.
    sql.batch_execute("VACUUM ANALYZE")
        .context("VACUUM ANALYZE")?;
    let size = sql_query("SELECT pg_size_pretty(pg_database_size(current_database())) AS value")
        .get_result::<Row>(&mut sql)?
        .value;
    report!(
        "  loaded in {:.1} s: {size} (contacts, 2 attributes each with their slots, 2 events, 1 message)",
        started.elapsed().as_secs_f64()
    );

    register_citus_workers(url);

    let stop = Arc::new(AtomicBool::new(false));
    let probes: Vec<_> = [Probe::Read, Probe::Write, Probe::Locks]
        .into_iter()
        .map(|probe| {
            let (url, stop) = (url.to_owned(), stop.clone());
            thread::spawn(move || probe.run(&url, &stop))
        })
        .collect();
    thread::sleep(Duration::from_millis(500));
    let converting = Instant::now();
    let migrate_url = url.to_owned();
    tokio::task::spawn_blocking(move || run_migrations(&migrate_url)).await??;
    let took = converting.elapsed();
    thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let outcomes: Vec<ProbeOutcome> = probes
        .into_iter()
        .map(|probe| probe.join().expect("a probe thread"))
        .collect::<Result<_>>()?;

    let distributed = sql_query("SELECT count(*) AS n FROM citus_tables")
        .get_result::<Count>(&mut sql)?
        .n;
    sql.batch_execute("SET citus.multi_task_query_log_level = 'off'")?;
    let moved = sql_query(format!(
        "SELECT count(*) AS n FROM contacts WHERE account_id = '{account}'"
    ))
    .get_result::<Count>(&mut sql)?
    .n;
    if moved != i64::try_from(contacts)? {
        bail!("{moved} contacts on the cluster after the conversion, not {contacts}");
    }
    report!(
        "  mailroom migrate (the conversion) {:>8.1} s: {distributed} tables distributed or copied, {} contacts on the workers",
        took.as_secs_f64(),
        thousands(contacts)
    );
    for outcome in outcomes {
        report!("  {}", outcome.describe());
    }
    Ok(())
}

/// What runs beside the conversion.
#[derive(Clone, Copy)]
enum Probe {
    /// Reads one contact every 100 ms.
    Read,
    /// Updates one contact every 100 ms.
    Write,
    /// Samples the lock modes held on `contacts` every 50 ms.
    Locks,
}

struct ProbeOutcome {
    probe: Probe,
    answered: u32,
    refused: u32,
    slowest: Duration,
    modes: BTreeSet<String>,
}

impl ProbeOutcome {
    fn describe(&self) -> String {
        match self.probe {
            Probe::Read | Probe::Write => format!(
                "{} of one contact during it: {} answered (slowest {:.0} ms), {} waited past the 200 ms lock timeout",
                if matches!(self.probe, Probe::Read) {
                    "reads"
                } else {
                    "writes"
                },
                self.answered,
                self.slowest.as_secs_f64() * 1000.0,
                self.refused
            ),
            Probe::Locks => format!(
                "locks held on contacts by others: {}",
                if self.modes.is_empty() {
                    "none seen".to_owned()
                } else {
                    self.modes.iter().cloned().collect::<Vec<_>>().join(", ")
                }
            ),
        }
    }
}

impl Probe {
    fn run(self, url: &str, stop: &AtomicBool) -> Result<ProbeOutcome> {
        let mut conn = PgConnection::establish(url)?;
        conn.batch_execute("SET lock_timeout = '200ms'")?;
        let mut outcome = ProbeOutcome {
            probe: self,
            answered: 0,
            refused: 0,
            slowest: Duration::ZERO,
            modes: BTreeSet::new(),
        };
        let statement = match self {
            Probe::Read => "SELECT id::text AS value FROM contacts WHERE email = 'c1@conversion.example'",
            Probe::Write => "UPDATE contacts SET sort_name = NULL WHERE email = 'c2@conversion.example' RETURNING id::text AS value",
            Probe::Locks => "SELECT coalesce(string_agg(DISTINCT mode, ','), '') AS value FROM pg_locks \
                             WHERE relation = 'contacts'::regclass AND granted AND pid <> pg_backend_pid()",
        };
        while !stop.load(Ordering::Relaxed) {
            let started = Instant::now();
            match sql_query(statement).load::<Row>(&mut conn) {
                Ok(rows) => {
                    outcome.answered += 1;
                    outcome.slowest = outcome.slowest.max(started.elapsed());
                    if matches!(self, Probe::Locks) {
                        for row in rows {
                            outcome.modes.extend(
                                row.value
                                    .split(',')
                                    .filter(|m| !m.is_empty())
                                    .map(str::to_owned),
                            );
                        }
                    }
                }
                Err(_) => outcome.refused += 1,
            }
            thread::sleep(Duration::from_millis(if matches!(self, Probe::Locks) {
                50
            } else {
                100
            }));
        }
        Ok(outcome)
    }
}
