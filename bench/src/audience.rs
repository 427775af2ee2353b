//! The audience benchmark: import, search, count and event recording, each beside a
//! reference, printed as one report.

use std::{
    path::Path,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, ensure, Context, Result};
use diesel::{
    connection::SimpleConnection,
    pg::PgConnection,
    sql_query,
    sql_types::{BigInt, Double, Text},
    QueryableByName, RunQueryDsl,
};
use mailroom_app::{
    ports::{in_transaction, UnitOfWork},
    users::{bootstrap_user, BootstrapRequest},
    AppError, Services,
};
use mailroom_domain::{
    attribute::AttributeType,
    condition::{parse_conditions, AttributeTypes, ConditionInput, Segment},
    paging::PageRequest,
    AccountId,
};
use mailroom_server::{Application, Config};
use mailroom_test_support::TestDatabase;

use crate::comparison::{Figure, Goal};
use serde_json::{json, Value};

use crate::{
    cpu::CpuSplit,
    data,
    events::{self, Audience, ScriptVariables, Target},
    stats::{ms, ratio, thousands, verdict, Latencies},
    Options,
};

/// Timed repetitions of each search and count (after a short warm-up).
const SEARCH_RUNS: usize = 200;
const WARM_UP_RUNS: usize = 5;
/// A slow search or count still ends: its runs stop after this long (at least 20 runs).
const TIME_BUDGET: Duration = Duration::from_secs(60);
const PGBENCH: &str = "/usr/bin/pgbench";

/// The search every measurement uses: three AND conditions, one per comparison family.
const PLAN: &str = "pro";
const MIN_SCORE: f64 = 500.0;
/// `after` this UTC day: from the start of the next day on.
const RENEWAL_AFTER: &str = "2026-07-01";
const RENEWAL_FROM: &str = "2026-07-02T00:00:00Z";

/// The benchmark's own connection, for setup and the flat-table reference; used from the
/// blocking pool because diesel blocks.
#[derive(Clone)]
struct Sql(Arc<Mutex<PgConnection>>);

impl Sql {
    /// Writes out every dirty page (`CHECKPOINT`, which needs a superuser or
    /// `pg_checkpoint`), so a timed run does not pay for the writes of the one before it.
    async fn checkpoint(&self) -> Result<()> {
        self.run(|conn| {
            sql_query("CHECKPOINT")
                .execute(conn)
                .context("CHECKPOINT before a timed run")?;
            Ok(())
        })
        .await
    }

    async fn run<R: Send + 'static>(
        &self,
        work: impl FnOnce(&mut PgConnection) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        let connection = self.0.clone();
        tokio::task::spawn_blocking(move || {
            let mut connection = connection
                .lock()
                .map_err(|_| anyhow!("the benchmark connection is poisoned"))?;
            work(&mut connection)
        })
        .await?
    }
}

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = Text)]
    id: String,
}

#[derive(QueryableByName)]
struct CountRow {
    #[diesel(sql_type = BigInt)]
    count: i64,
}

#[derive(QueryableByName)]
struct TextRow {
    #[diesel(sql_type = Text)]
    value: String,
}

/// The report, printed as it grows so a long run shows progress.
struct Report;

impl Report {
    fn section(&self, title: &str) {
        report!("\n{title}");
    }

    fn line(&self, label: &str, value: impl std::fmt::Display) {
        report!("  {label:<34} {value}");
    }
}

/// Prefix of the databases `--reuse` keeps (the contact count and the migrations'
/// fingerprint follow).
const KEPT_PREFIX: &str = "mailroom_bench_audience_";

pub async fn run(options: &Options) -> Result<()> {
    let report = Report;
    let wall = Instant::now();
    let (database, reused) = if options.reuse {
        let contacts = options.contacts;
        tokio::task::spawn_blocking(move || open_kept(contacts))
            .await
            .context("opening the kept database")?
    } else {
        let database = tokio::task::spawn_blocking(TestDatabase::create)
            .await
            .context("creating the database")?;
        (database, None)
    };
    let url = database.url().to_owned();
    let name = database.name().to_owned();
    let outcome = measure(options, &report, &url, reused).await;
    // Dropped explicitly, after the server's last query, so the database goes even when a
    // step failed; a kept one stays for the next run.
    tokio::task::spawn_blocking(move || drop(database)).await?;
    if options.reuse {
        report!("\nKept database {name} for the next --reuse run (drop it with DROP DATABASE).");
    }
    report!("\nTotal wall time: {:.0} s", wall.elapsed().as_secs_f64());
    outcome
}

/// What a kept database holds from the run that generated it.
#[derive(QueryableByName)]
struct KeptState {
    #[diesel(sql_type = Text)]
    account: String,
}

/// The kept database for `contacts`, and its account when a previous run completed the
/// setup in it; a database left half-built is dropped and made again.
fn open_kept(contacts: u64) -> (TestDatabase, Option<String>) {
    let label = contacts.to_string();
    let (database, existed) = TestDatabase::kept(KEPT_PREFIX, &label);
    if !existed {
        return (database, None);
    }
    let state = sql_query("SELECT account FROM bench_state LIMIT 1")
        .get_result::<KeptState>(&mut database.connection())
        .ok();
    match state {
        Some(state) => (database, Some(state.account)),
        None => {
            database.drop_now();
            (TestDatabase::kept(KEPT_PREFIX, &label).0, None)
        }
    }
}

async fn measure(
    options: &Options,
    report: &Report,
    url: &str,
    reused: Option<String>,
) -> Result<()> {
    let mut config = Config::new(url, [7u8; 32]);
    config.listen = ([127, 0, 0, 1], 0).into();
    if let Some(pool) = options.pool {
        config.db_pool_size = pool;
    }
    config.http_workers = 2;
    config.run_workers = false;
    // The benchmarks measure the service, not the rate limit.
    config.rate_limit = None;
    let build_config = config.clone();
    let application =
        tokio::task::spawn_blocking(move || Application::build(&build_config)).await??;
    let address = format!("http://127.0.0.1:{}", application.port());
    let services = application.services();
    let adapter_services = services.clone();
    tokio::spawn(application.run_until_stopped());

    // A fresh user per run: a reused database already has the earlier runs' users.
    let bootstrap = BootstrapRequest {
        email: format!("bench-{}@bench.example", std::process::id()),
        token_name: "bench".into(),
        expires_in_days: None,
    };
    let bootstrapped =
        tokio::task::spawn_blocking(move || bootstrap_user(&services, bootstrap)).await??;
    let token = bootstrapped.token.raw.expose().to_owned();
    let user = bootstrapped.user_id.to_string();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(1800))
        .build()?;
    // The bench's own statements may read every shard on Citus.
    let sql = Sql(Arc::new(Mutex::new(
        mailroom_test_support::assertion_connection(url),
    )));
    let account = match reused.clone() {
        Some(account) => {
            let (member, account_id) = (user.clone(), account.clone());
            sql.run(move |conn| {
                sql_query(
                    "INSERT INTO memberships (account_id, user_id, role, created_at) \
                     VALUES ($1::uuid, $2::uuid, 'admin', now())",
                )
                .bind::<Text, _>(account_id)
                .bind::<Text, _>(member)
                .execute(conn)?;
                Ok(())
            })
            .await?;
            account
        }
        None => create_account(&client, &address, &token).await?,
    };
    let postgres = sql
        .run(|conn| {
            query_text(
                conn,
                "SELECT current_setting('server_version') || ', shared_buffers ' \
                 || current_setting('shared_buffers') || ', max_wal_size ' \
                 || current_setting('max_wal_size') || ', synchronous_commit ' \
                 || current_setting('synchronous_commit') AS value",
            )
        })
        .await?;

    report!("Mailroom audience benchmark");
    report.line(
        "machine",
        format!(
            "{} cores",
            std::thread::available_parallelism().map_or(0, usize::from)
        ),
    );
    report.line("PostgreSQL", postgres);
    report.line(
        "server",
        format!(
            "in-process, release build, 2 HTTP workers, pool {}{}, background workers off",
            config.db_pool_size,
            if options.pool.is_some() {
                " (--pool)"
            } else {
                " (the server's default)"
            }
        ),
    );
    report.line(
        "database",
        match (&reused, options.reuse) {
            (Some(_), _) => "kept from an earlier run (--reuse)",
            (None, true) => "fresh, kept at the end (--reuse)",
            (None, false) => "fresh, dropped at the end",
        },
    );

    match &reused {
        Some(_) => report.line(
            "data",
            "reused from an earlier run with the same contacts and migrations (--reuse)",
        ),
        None => generate(options, report, &client, &address, &token, &account, &sql).await?,
    }
    let started = Instant::now();
    sql.run(|conn| {
        // Separate calls: several statements in one batch form one transaction, which
        // VACUUM refuses.
        conn.batch_execute(
            "VACUUM (ANALYZE) contacts, contact_attributes, contact_slots, contact_events, attribute_metas, bench_flat",
        )?;
        conn.batch_execute("ANALYZE")?;
        Ok(())
    })
    .await?;
    report.line(
        "VACUUM (ANALYZE) and ANALYZE",
        format!("{:.1} s", started.elapsed().as_secs_f64()),
    );

    // Search and count.
    let conditions = json!({
        "includeUnsubscribed": true,
        "attributes": [
            {"slug": "plan", "operator": "s_equal", "value": PLAN},
            {"slug": "score", "operator": "greater_than", "value": MIN_SCORE},
            {"slug": "renewal", "operator": "after", "value": RENEWAL_AFTER},
        ],
    });
    report.section(&format!(
        "Search: plan s_equal '{PLAN}' AND score greater_than {MIN_SCORE} AND renewal after {RENEWAL_AFTER}; first page of 25"
    ));
    let search_url = format!("{address}/v2/accounts/{account}/contacts/search?limit=25");
    let count_url = format!("{address}/v2/accounts/{account}/contacts/search/count");
    let api_search = time_http(
        &client,
        &token,
        &search_url,
        &conditions,
        SEARCH_RUNS,
        Some(TIME_BUDGET),
    )
    .await?;
    let flat_search = sql
        .run(|conn| time_flat(conn, SEARCH_RUNS, Some(TIME_BUDGET), flat_first_page))
        .await?;
    let account_id: AccountId = account
        .parse()
        .map_err(|_| anyhow!("the account id {account} is not a uuid"))?;
    let segment = bench_segment()?;
    let (search_services, search_segment) = (adapter_services.clone(), segment.clone());
    let (adapter_search, _) = tokio::task::spawn_blocking(move || {
        time_adapter(&search_services, SEARCH_RUNS, TIME_BUDGET, |tx| {
            Ok(tx.search_segment(account_id, &search_segment, PageRequest::default(), None)?)
        })
    })
    .await??;
    match &api_search {
        Some((latencies, answer)) => {
            let api_ids: Vec<String> = answer["items"]
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|item| item["_id"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            let (flat_latencies, flat_ids) = &flat_search;
            let same = &api_ids == flat_ids;
            print_comparison(report, latencies, flat_latencies);
            report.line(
                "same 25 contacts as the flat table",
                if same {
                    "yes".to_owned()
                } else {
                    format!("NO (api {api_ids:?} flat {flat_ids:?})")
                },
            );
            print_adapter(report, &adapter_search, flat_latencies);
            let p95 = latencies.percentile(95.0);
            report.line(
                "target API p95 ≤ 10 ms",
                verdict(p95 <= Duration::from_millis(10)),
            );
            report.line(
                "target SQL ≤ 2x flat (p95)",
                verdict(
                    adapter_search.percentile(95.0).as_secs_f64()
                        <= 2.0 * flat_latencies.percentile(95.0).as_secs_f64(),
                ),
            );
        }
        None => report.line(
            "POST …/contacts/search",
            "not served by this build; skipped",
        ),
    }

    report.section("Search count: the same conditions, POST …/contacts/search/count");
    let api_count = time_http(
        &client,
        &token,
        &count_url,
        &conditions,
        SEARCH_RUNS,
        Some(TIME_BUDGET),
    )
    .await?;
    let flat_count = sql
        .run(|conn| time_flat(conn, SEARCH_RUNS, Some(TIME_BUDGET), flat_count))
        .await?;
    let (count_services, count_segment) = (adapter_services.clone(), segment.clone());
    let (adapter_count, _) = tokio::task::spawn_blocking(move || {
        time_adapter(&count_services, SEARCH_RUNS, TIME_BUDGET, |tx| {
            Ok(tx.count_segment(account_id, &count_segment)?)
        })
    })
    .await??;
    match &api_count {
        Some((latencies, answer)) => {
            let (flat_latencies, flat_answer) = &flat_count;
            print_comparison(report, latencies, flat_latencies);
            print_adapter(report, &adapter_count, flat_latencies);
            report.line(
                "count (api / flat)",
                format!("{} / {}", answer["count"], flat_answer),
            );
            crate::comparison::record(
                "count_p95",
                latencies.percentile(95.0).as_secs_f64() * 1000.0,
            );
            report.line(
                "target API p95 ≤ 150 ms",
                verdict(latencies.percentile(95.0) <= Duration::from_millis(150)),
            );
        }
        None => report.line(
            "POST …/contacts/search/count",
            "not served by this build; skipped",
        ),
    }

    engagement_counts(report, &client, &token, &count_url, &sql, &account).await?;

    // Event recording.
    let seconds = Duration::from_secs(options.seconds);
    report.section(&format!(
        "Events: POST …/events, {} keep-alive clients × {} s, beside pgbench ({} clients, same statements, prepared)",
        events::CLIENTS,
        options.seconds,
        events::CLIENTS
    ));
    // The first timed side would otherwise read from disk what the sides after it find
    // in the OS's cache, and at 3M contacts the first side collapsed while pgbench right
    // after it did not (docs/performance.md, "Measuring").
    let started = Instant::now();
    let warmed = sql.run(warm_event_relations).await;
    report.line(
        "OS cache warmed before the sides",
        match warmed {
            Ok(bytes) => format!(
                "{:.1} GB of the event's tables and indexes read with pg_prewarm in {:.1} s",
                bytes as f64 / 1e9,
                started.elapsed().as_secs_f64()
            ),
            Err(error) => format!("no ({error:#}); the first side may pay for cold reads"),
        },
    );
    let target = Target {
        address: address.clone(),
        token: token.clone(),
        account: account.clone(),
        contacts: options.contacts,
    };
    // The bench's user holds the only token, so pgbench looks up the same one as the API.
    let token_hash_hex = sql
        .run(|conn| {
            sql_query("SELECT encode(token_hash, 'hex') AS value FROM tokens LIMIT 1")
                .get_result::<TextRow>(conn)
                .map(|row| row.value)
                .context("reading the token's hash")
        })
        .await?;
    let variables = ScriptVariables {
        account: account.clone(),
        user,
        token_hash_hex,
    };
    report!(
        "  {:<16} {:>12} {:>10} {:>10} {:>8} {:>14} {:>10} {:>8}",
        "",
        "API req/s",
        "p50",
        "p99",
        "failed",
        "pgbench tps",
        "pg p99",
        "ratio"
    );
    let mut all_met = true;
    let mut cpu_rows = Vec::new();
    for audience in [Audience::Known, Audience::New] {
        // Each side starts with the dirty pages of what ran before it written out: the API
        // ran first, inside the checkpoints of the import's and the setup's WAL, and its
        // commits waited on the disk that pgbench then had to itself.
        sql.checkpoint().await?;
        let before = CpuSplit::now();
        let api = events::api_run(&target, audience, seconds).await?;
        let api_cpu = CpuSplit::now().since(before);
        sql.checkpoint().await?;
        let before = CpuSplit::now();
        let script = events::write_script(audience)?;
        let pgbench_url = url.to_owned();
        let contacts = options.contacts;
        let script_path = script.clone();
        let pg_variables = ScriptVariables {
            account: variables.account.clone(),
            user: variables.user.clone(),
            token_hash_hex: variables.token_hash_hex.clone(),
        };
        let pgbench = tokio::task::spawn_blocking(move || {
            events::pgbench_run(
                Path::new(PGBENCH),
                &pgbench_url,
                &script_path,
                &pg_variables,
                contacts,
                seconds,
            )
        })
        .await?;
        let _ = std::fs::remove_file(&script);
        let pgbench = pgbench?;
        let pgbench_cpu = CpuSplit::now().since(before);
        cpu_rows.push((
            audience.label(),
            per_event(api_cpu, api.ok as f64),
            per_event(pgbench_cpu, pgbench.tps * seconds.as_secs_f64()),
        ));
        report!(
            "  {:<16} {:>12.0} {:>10} {:>10} {:>8} {:>14.0} {:>10} {:>8}",
            audience.label(),
            api.per_second,
            ms(api.latencies.percentile(50.0)),
            ms(api.latencies.percentile(99.0)),
            api.failed + pgbench.failed,
            pgbench.tps,
            ms(pgbench.latencies.percentile(99.0)),
            ratio(api.per_second, pgbench.tps)
        );
        let key = match audience {
            Audience::Known => "events_known",
            Audience::New => "events_new",
        };
        crate::comparison::record(key, api.per_second);
        crate::comparison::record(
            &format!("{key}_p99"),
            api.latencies.percentile(99.0).as_secs_f64() * 1000.0,
        );
        all_met &= api.ok > 0
            && api.per_second >= 0.8 * pgbench.tps
            && api.latencies.percentile(99.0) <= Duration::from_millis(50);
    }
    report.line("target ≥ 0.8 of pgbench, p99 ≤ 50 ms", verdict(all_met));
    report.line(
        "note",
        "failed counts API errors plus pgbench's failed transactions",
    );
    // Who spent the two cores: the API's side and pgbench's, per event, so the ratio's
    // gap can be read as CPU (the load generator shares the machine with the server).
    report!(
        "  {:<16} {:>22} {:>22} {:>22}",
        "CPU per event",
        "server (API) µs",
        "client µs",
        "PostgreSQL µs"
    );
    for (label, api, pgbench) in cpu_rows {
        report!(
            "  {:<16} {:>22.0} {:>22.0} {:>22.0}",
            format!("{label}, API"),
            api.server,
            api.load,
            api.postgres
        );
        report!(
            "  {:<16} {:>22} {:>22.0} {:>22.0}",
            format!("{label}, pgbench"),
            "–",
            pgbench.waited_children,
            pgbench.postgres
        );
    }
    crate::comparison::print(&[
        Figure {
            name: "count_p95",
            label: "segment count p95, ms",
            target: Goal::AtMost(2.0),
        },
        Figure {
            name: "events_known",
            label: "events of known contacts, req/s",
            target: Goal::AtLeast(0.7),
        },
        Figure {
            name: "events_known_p99",
            label: "  their p99, ms",
            target: Goal::None,
        },
        Figure {
            name: "events_new",
            label: "events of new contacts, req/s",
            target: Goal::AtLeast(0.7),
        },
        Figure {
            name: "events_new_p99",
            label: "  their p99, ms",
            target: Goal::None,
        },
    ]);
    Ok(())
}

/// CPU per event, in microseconds, of each side of a run of `events` events.
struct CpuPerEvent {
    server: f64,
    load: f64,
    waited_children: f64,
    postgres: f64,
}

fn per_event(cpu: CpuSplit, events: f64) -> CpuPerEvent {
    let micros = |time: Duration| time.as_secs_f64() * 1e6 / events.max(1.0);
    CpuPerEvent {
        server: micros(cpu.server),
        load: micros(cpu.load),
        waited_children: micros(cpu.waited_children),
        postgres: micros(cpu.postgres),
    }
}

/// How many days back the engagement count looks, and how the generated messages spread
/// over the last [`ENGAGEMENT_SPREAD_DAYS`]: about half the sent messages fall in it.
const ENGAGEMENT_DAYS: u16 = 30;
const ENGAGEMENT_SPREAD_DAYS: u16 = 60;

/// One message per contact (an announcement's, sent at a random time of the last 60
/// days), a first open for a quarter of them and a click for a third of those, then the
/// contacts' latest activity written from the messages by the statement the migration
/// that added it runs (`2026-12-03-000001_contact_engagement`). Skipped when the account
/// has messages already (a `--reuse` run).
fn generate_messages(conn: &mut PgConnection, account: &str) -> Result<bool> {
    #[derive(QueryableByName)]
    struct Present {
        #[diesel(sql_type = diesel::sql_types::Bool)]
        present: bool,
    }
    let present: Present = sql_query(format!(
        "SELECT EXISTS (SELECT 1 FROM messages WHERE account_id = '{account}') AS present"
    ))
    .get_result(conn)?;
    if present.present {
        return Ok(false);
    }
    let backfill = include_str!("../../migrations/2026-12-03-000001_contact_engagement/up.sql");
    let backfill = &backfill[backfill
        .find("UPDATE contacts")
        .ok_or_else(|| anyhow!("the engagement migration has no backfill"))?..];
    conn.batch_execute(&format!(
        "INSERT INTO messages (account_id, id, contact_id, email, template_id, kind, status, \
                               data, attempts, message_id_header, created_at, updated_at, \
                               sent_at, announcement_id) \
         SELECT m.account_id, m.id, m.contact_id, m.email, \
                '00000000-0000-7000-8000-00000000b001', 'announcement', 'sent', '{{}}'::jsonb, 1, \
                '<' || m.id || '@bench.example>', m.at, m.at, m.at, \
                '00000000-0000-7000-8000-00000000b002' \
         FROM (SELECT c.account_id, gen_random_uuid() AS id, c.id AS contact_id, c.email, \
                      now() - random() * interval '{ENGAGEMENT_SPREAD_DAYS} days' AS at \
               FROM contacts c WHERE c.account_id = '{account}') m; \
         INSERT INTO message_tracking (account_id, message_id, opened_at, clicked_at) \
         SELECT account_id, id, sent_at + interval '1 hour', \
                CASE WHEN random() < 0.33 THEN sent_at + interval '2 hours' END \
         FROM messages WHERE account_id = '{account}' AND random() < 0.25;"
    ))?;
    conn.batch_execute(backfill)?;
    Ok(true)
}

/// The count of contacts who opened any message in the last [`ENGAGEMENT_DAYS`] days
/// beside the count on one attribute (`score greater_than`, about half the contacts), both
/// through `POST …/contacts/search/count`.
async fn engagement_counts(
    report: &Report,
    client: &reqwest::Client,
    token: &str,
    count_url: &str,
    sql: &Sql,
    account: &str,
) -> Result<()> {
    report.section(&format!(
        "Engagement count: engagement.opened within_days {ENGAGEMENT_DAYS} beside score greater_than {MIN_SCORE}, POST …/contacts/search/count"
    ));
    let started = Instant::now();
    let owner = account.to_owned();
    let generated = sql
        .run(move |conn| {
            let generated = generate_messages(conn, &owner)?;
            conn.batch_execute("VACUUM (ANALYZE) contacts, messages, message_tracking")?;
            Ok(generated)
        })
        .await?;
    report.line(
        "messages (one per contact, a quarter opened)",
        if generated {
            format!("generated in {:.1} s", started.elapsed().as_secs_f64())
        } else {
            "present (--reuse)".to_owned()
        },
    );
    let body = |condition: Value| json!({"includeUnsubscribed": true, "attributes": [condition]});
    let attribute = body(json!({"slug": "score", "operator": "greater_than", "value": MIN_SCORE}));
    let engagement = body(json!({
        "slug": "engagement.opened", "operator": "within_days", "value": ENGAGEMENT_DAYS
    }));
    let timed = |body: Value| async move {
        time_http(
            client,
            token,
            count_url,
            &body,
            SEARCH_RUNS,
            Some(TIME_BUDGET),
        )
        .await
    };
    let (Some((attribute_latencies, attribute_answer)), Some((latencies, answer))) =
        (timed(attribute).await?, timed(engagement).await?)
    else {
        report.line(
            "POST …/contacts/search/count",
            "not served by this build; skipped",
        );
        return Ok(());
    };
    report!(
        "  {:<16} {:>14} {:>14} {:>8}",
        "",
        "engagement",
        "attribute",
        "ratio"
    );
    for p in [50.0, 95.0] {
        let (e, a) = (latencies.percentile(p), attribute_latencies.percentile(p));
        report!(
            "  {:<16} {:>14} {:>14} {:>8}",
            format!("p{p:.0}"),
            ms(e),
            ms(a),
            ratio(e.as_secs_f64(), a.as_secs_f64())
        );
    }
    report.line(
        "count (engagement / attribute)",
        format!("{} / {}", answer["count"], attribute_answer["count"]),
    );
    let (engaged, plain) = (
        latencies.percentile(95.0).as_secs_f64(),
        attribute_latencies.percentile(95.0).as_secs_f64(),
    );
    report.line(
        "target engagement p95 ≤ 2x attribute p95",
        verdict(engaged <= 2.0 * plain),
    );
    Ok(())
}

/// The benchmark's conditions as the domain's segment, parsed as the API parses them.
fn bench_segment() -> Result<Segment> {
    struct BenchTypes;
    impl AttributeTypes for BenchTypes {
        fn attribute_type(&self, slug: &str) -> Option<AttributeType> {
            match slug {
                "plan" => Some(AttributeType::String),
                "score" => Some(AttributeType::Number),
                "renewal" => Some(AttributeType::Date),
                _ => None,
            }
        }
    }
    let input = |slug: &str, operator: &str, value: Value| ConditionInput {
        slug: slug.into(),
        operator: operator.into(),
        value: Some(value),
    };
    let conditions = parse_conditions(
        &[
            input("plan", "s_equal", json!(PLAN)),
            input("score", "greater_than", json!(MIN_SCORE)),
            input("renewal", "after", json!(RENEWAL_AFTER)),
        ],
        &BenchTypes,
        mailroom_domain::Timestamp::from_datetime(time::OffsetDateTime::now_utc()),
    )
    .map_err(|error| anyhow!("the bench's conditions: {}", error.summary()))?;
    Ok(Segment {
        conditions,
        include_unsubscribed: true,
        topic: None,
    })
}

/// Times the adapter alone: `runs` transactions of the repository call `query` (its SQL,
/// the plan choice included, without HTTP, JSON or the contacts' attributes).
fn time_adapter<R>(
    services: &Services,
    runs: usize,
    budget: Duration,
    query: impl Fn(&mut dyn UnitOfWork) -> Result<R, AppError>,
) -> Result<(Latencies, R)> {
    let once = || {
        in_transaction(services.db.as_ref(), |tx| query(tx))
            .map_err(|error| anyhow!("the adapter's query: {error}"))
    };
    for _ in 0..WARM_UP_RUNS {
        once()?;
    }
    let mut samples = Vec::with_capacity(runs);
    let started = Instant::now();
    let mut last = once()?;
    for _ in 0..runs {
        let sent = Instant::now();
        last = once()?;
        samples.push(sent.elapsed());
        if started.elapsed() > budget && samples.len() >= 20 {
            break;
        }
    }
    Ok((Latencies::new(samples), last))
}

/// The adapter's own time beside the flat table's.
fn print_adapter(report: &Report, adapter: &Latencies, flat: &Latencies) {
    for p in [50.0, 95.0] {
        let (a, f) = (adapter.percentile(p), flat.percentile(p));
        report.line(
            &format!("SQL alone (adapter) p{p:.0}"),
            format!(
                "{}   ({} of flat)",
                ms(a),
                ratio(a.as_secs_f64(), f.as_secs_f64())
            ),
        );
    }
}

/// Contacts per import file (see `generate`).
const IMPORT_FILE_CONTACTS: u64 = 1_000_000;

/// Imports the audience through the API, records its events in bulk and builds the flat
/// reference table; then marks the database complete for `--reuse`.
async fn generate(
    options: &Options,
    report: &Report,
    client: &reqwest::Client,
    address: &str,
    token: &str,
    account: &str,
    sql: &Sql,
) -> Result<()> {
    // Import.
    report.section(&format!(
        "Import: POST …/contacts/import, {} contacts × 5 attributes (plan, score, vip, renewal, city), CSV streamed as generated",
        thousands(options.contacts)
    ));
    let wal_before = sql
        .run(|conn| query_text(conn, "SELECT pg_current_wal_lsn()::text AS value"))
        .await?;
    let checkpoints_before = sql.run(checkpoints).await?;
    let cpu_before = CpuSample::now();
    let started = Instant::now();
    // One file per IMPORT_FILE_CONTACTS (about 70 MB of CSV each): the API refuses a file
    // over 200 MiB, as a user with 3M contacts would find, and splits are what it asks for.
    let (mut created, mut updated, mut rejected) = (0, 0, 0);
    let mut first = 0;
    while first < options.contacts {
        let end = (first + IMPORT_FILE_CONTACTS).min(options.contacts);
        let response = client
            .post(format!("{address}/v2/accounts/{account}/contacts/import"))
            .bearer_auth(token)
            .header("content-type", "text/csv")
            .body(reqwest::Body::wrap_stream(data::csv_body(first, end)))
            .send()
            .await?;
        let status = response.status();
        let imported: Value = response.json().await?;
        ensure!(status == 200, "the import answered {status}: {imported}");
        created += imported["created"].as_u64().unwrap_or(0);
        updated += imported["updated"].as_u64().unwrap_or(0);
        rejected += imported["rejected"].as_u64().unwrap_or(0);
        first = end;
    }
    let import_time = started.elapsed();
    let imported_files = options.contacts.div_ceil(IMPORT_FILE_CONTACTS);
    let cpu_busy = cpu_before.and_then(|before| before.busy_share_since());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let wal_bytes = sql
        .run(move |conn| {
            Ok(sql_query(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint AS count",
            )
            .bind::<Text, _>(wal_before)
            .get_result::<CountRow>(conn)?
            .count)
        })
        .await?;
    let checkpoints_during = sql.run(checkpoints).await? - checkpoints_before;
    ensure!(
        created == options.contacts && rejected == 0,
        "the import did not create every contact: {created} created, {updated} updated, {rejected} rejected"
    );
    let import_rate = options.contacts as f64 / import_time.as_secs_f64();
    report.line(
        "created / updated / rejected",
        format!("{} / {} / {}", thousands(created), updated, rejected),
    );
    report.line(
        "time",
        format!(
            "{:.1} s ({imported_files} file{} of at most {} contacts)",
            import_time.as_secs_f64(),
            if imported_files == 1 { "" } else { "s" },
            thousands(IMPORT_FILE_CONTACTS)
        ),
    );
    report.line(
        "rate",
        format!(
            "{} contacts/s   (target ≥ 20,000/s: {})",
            thousands(import_rate as u64),
            verdict(import_rate >= 20_000.0)
        ),
    );
    // What bounded it: the machine's CPU (shared with anything else running), and the
    // WAL the indexes cost (cluster-wide figures, so other databases' writes count too).
    report.line(
        "machine CPU busy / load average",
        format!(
            "{} / {}",
            cpu_busy.map_or("n/a".to_owned(), |busy| format!("{:.0}%", busy * 100.0)),
            load.split_whitespace().next().unwrap_or("n/a")
        ),
    );
    report.line(
        "WAL written / checkpoints",
        format!(
            "{} MB ({:.1} KB per contact) / {checkpoints_during}",
            thousands((wal_bytes / 1_000_000) as u64),
            wal_bytes as f64 / 1000.0 / options.contacts as f64
        ),
    );

    // Events, in bulk: the API's per-event path is measured below; a million of them
    // through it would dominate the run.
    report.section("Setup outside the API (bulk SQL through diesel, for time)");
    let started = Instant::now();
    let setup_account = account.to_owned();
    let events_written = sql
        .run(move |conn| record_events_in_bulk(conn, &setup_account))
        .await?;
    report.line(
        "events",
        format!(
            "{} contact_events (3 per contact: {}), their event.* date attributes and 3 attribute metas (source 'event'), {:.1} s",
            thousands(events_written),
            data::EVENT_SLUGS.join(", "),
            started.elapsed().as_secs_f64()
        ),
    );
    let started = Instant::now();
    let flat_account = account.to_owned();
    sql.run(move |conn| build_flat_table(conn, &flat_account))
        .await?;
    report.line(
        "reference flat table",
        format!(
            "bench_flat: one typed, indexed column per attribute, same data, {:.1} s",
            started.elapsed().as_secs_f64()
        ),
    );
    let state_account = account.to_owned();
    sql.run(move |conn| {
        conn.batch_execute("CREATE TABLE bench_state (account text NOT NULL)")?;
        sql_query("INSERT INTO bench_state (account) VALUES ($1)")
            .bind::<Text, _>(state_account)
            .execute(conn)?;
        Ok(())
    })
    .await?;
    Ok(())
}

/// A new account through the API, for a fresh database.
async fn create_account(client: &reqwest::Client, address: &str, token: &str) -> Result<String> {
    let created = client
        .post(format!("{address}/v2/accounts"))
        .bearer_auth(token)
        .json(&json!({"name": "Bench"}))
        .send()
        .await?;
    ensure!(
        created.status() == 200,
        "account creation answered {}",
        created.status()
    );
    Ok(created.json::<Value>().await?["_id"]
        .as_str()
        .context("account id")?
        .to_owned())
}

fn print_comparison(report: &Report, api: &Latencies, flat: &Latencies) {
    report!(
        "  {:<16} {:>14} {:>14} {:>8}",
        "",
        "API (HTTP)",
        "flat (SQL)",
        "ratio"
    );
    for p in [50.0, 95.0] {
        let (a, f) = (api.percentile(p), flat.percentile(p));
        report!(
            "  {:<16} {:>14} {:>14} {:>8}",
            format!("p{p:.0}"),
            ms(a),
            ms(f),
            ratio(a.as_secs_f64(), f.as_secs_f64())
        );
    }
    report.line(
        "timed runs (api / flat)",
        format!("{} / {}", api.len(), flat.len()),
    );
}

/// Times `runs` POSTs of `body` (after a warm-up), stopping early after `budget`; `None`
/// when the route is not served (404 or 405).
async fn time_http(
    client: &reqwest::Client,
    token: &str,
    url: &str,
    body: &Value,
    runs: usize,
    budget: Option<Duration>,
) -> Result<Option<(Latencies, Value)>> {
    let mut samples = Vec::with_capacity(runs);
    let mut last = Value::Null;
    let started = Instant::now();
    for run in 0..WARM_UP_RUNS + runs {
        let sent = Instant::now();
        let response = client
            .post(url)
            .bearer_auth(token)
            .json(body)
            .send()
            .await?;
        let status = response.status();
        let text = response.text().await?;
        let elapsed = sent.elapsed();
        if status == 404 || status == 405 {
            return Ok(None);
        }
        if status != 200 {
            bail!("{url} answered {status}: {text}");
        }
        if run >= WARM_UP_RUNS {
            samples.push(elapsed);
        }
        last = serde_json::from_str(&text)?;
        if budget.is_some_and(|budget| started.elapsed() > budget) && samples.len() >= 20 {
            break;
        }
    }
    Ok(Some((Latencies::new(samples), last)))
}

/// Times a flat-table query like [`time_http`] and returns its last answer.
fn time_flat<R>(
    conn: &mut PgConnection,
    runs: usize,
    budget: Option<Duration>,
    query: fn(&mut PgConnection) -> Result<R>,
) -> Result<(Latencies, R)> {
    for _ in 0..WARM_UP_RUNS {
        query(conn)?;
    }
    let mut samples = Vec::with_capacity(runs);
    let started = Instant::now();
    let mut last = query(conn)?;
    for _ in 0..runs {
        let sent = Instant::now();
        last = query(conn)?;
        samples.push(sent.elapsed());
        if budget.is_some_and(|budget| started.elapsed() > budget) && samples.len() >= 20 {
            break;
        }
    }
    Ok((Latencies::new(samples), last))
}

/// Reads every table an event writes, with its indexes, into the OS's page cache
/// (`pg_prewarm`'s `read` mode: through the kernel, not into shared buffers) and answers
/// how many bytes that was. Needs the `pg_prewarm` extension, shipped with PostgreSQL.
fn warm_event_relations(conn: &mut PgConnection) -> Result<i64> {
    sql_query("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        .execute(conn)
        .context("CREATE EXTENSION pg_prewarm")?;
    let tables = "'contacts', 'contact_attributes', 'contact_events', \
                  'contact_event_increments', 'attribute_metas', 'automations'";
    Ok(sql_query(format!(
        "SELECT coalesce(sum(pg_prewarm(c.oid, 'read') * current_setting('block_size')::bigint), 0)::bigint AS count \
         FROM pg_class c \
         WHERE c.relname IN ({tables}) AND c.relkind = 'r' \
            OR c.oid IN (SELECT i.indexrelid FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid \
                         WHERE t.relname IN ({tables}) AND t.relkind = 'r')"
    ))
    .get_result::<CountRow>(conn)
    .context("pg_prewarm")?
    .count)
}

fn query_text(conn: &mut PgConnection, query: &str) -> Result<String> {
    Ok(sql_query(query).get_result::<TextRow>(conn)?.value)
}

/// Checkpoints so far (timed and requested), cluster-wide.
fn checkpoints(conn: &mut PgConnection) -> Result<i64> {
    Ok(
        sql_query("SELECT checkpoints_timed + checkpoints_req AS count FROM pg_stat_bgwriter")
            .get_result::<CountRow>(conn)?
            .count,
    )
}

/// The machine's CPU counters (`/proc/stat`), to tell how busy all cores were.
struct CpuSample {
    idle: u64,
    total: u64,
}

impl CpuSample {
    fn now() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let fields: Vec<u64> = stat
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .filter_map(|field| field.parse().ok())
            .collect();
        // idle and iowait are the 4th and 5th fields.
        let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
        Some(Self {
            idle,
            total: fields.iter().sum(),
        })
    }

    /// The share of CPU time all cores spent busy since this sample.
    fn busy_share_since(&self) -> Option<f64> {
        let now = Self::now()?;
        let total = now.total.checked_sub(self.total)?;
        let idle = now.idle.checked_sub(self.idle)?;
        (total > 0).then(|| 1.0 - idle as f64 / total as f64)
    }
}

const FLAT_WHERE: &str = "lower(plan) = lower($1) AND score > $2 AND renewal >= $3::timestamptz";

fn flat_first_page(conn: &mut PgConnection) -> Result<Vec<String>> {
    Ok(sql_query(format!(
        "SELECT id::text AS id FROM bench_flat WHERE {FLAT_WHERE} ORDER BY bench_flat.id LIMIT 25"
    ))
    .bind::<Text, _>(PLAN)
    .bind::<Double, _>(MIN_SCORE)
    .bind::<Text, _>(RENEWAL_FROM)
    .load::<IdRow>(conn)?
    .into_iter()
    .map(|row| row.id)
    .collect())
}

fn flat_count(conn: &mut PgConnection) -> Result<i64> {
    Ok(sql_query(format!(
        "SELECT count(*) AS count FROM bench_flat WHERE {FLAT_WHERE}"
    ))
    .bind::<Text, _>(PLAN)
    .bind::<Double, _>(MIN_SCORE)
    .bind::<Text, _>(RENEWAL_FROM)
    .get_result::<CountRow>(conn)?
    .count)
}

/// Three events per contact, written as the API would leave them: the event rows, the
/// latest time of each as the contact's `event.<slug>` date attribute, and the metas.
fn record_events_in_bulk(conn: &mut PgConnection, account: &str) -> Result<u64> {
    // One big statement per step; losing it in a crash would only mean rerunning. The
    // rows reference contacts that exist by construction, so the per-row foreign-key
    // triggers are skipped (`session_replication_role`): they were most of this step.
    conn.batch_execute("SET synchronous_commit = off; SET session_replication_role = replica")?;
    let slugs = data::EVENT_SLUGS
        .map(|slug| format!("('{slug}')"))
        .join(", ");
    sql_query(format!(
        "INSERT INTO attribute_metas (account_id, slug, attribute_type, source, created_at) \
         SELECT $1::uuid, 'event.' || s.slug, 'date', 'event', now() FROM (VALUES {slugs}) AS s(slug) \
         ON CONFLICT DO NOTHING"
    ))
    .bind::<Text, _>(account)
    .execute(conn)?;
    let events = sql_query(format!(
        "INSERT INTO contact_events (account_id, id, contact_id, slug, occurred_at) \
         SELECT c.account_id, gen_random_uuid(), c.id, s.slug, \
                timestamptz '2026-01-01 00:00:00+00' + random() * interval '330 days' \
         FROM contacts c CROSS JOIN (VALUES {slugs}) AS s(slug) WHERE c.account_id = $1::uuid"
    ))
    .bind::<Text, _>(account)
    .execute(conn)?;
    sql_query(
        "INSERT INTO contact_attributes (account_id, contact_id, slug, date_value) \
         SELECT account_id, contact_id, 'event.' || slug, max(occurred_at) FROM contact_events \
         WHERE account_id = $1::uuid GROUP BY account_id, contact_id, slug \
         ON CONFLICT (account_id, contact_id, slug) DO UPDATE SET date_value = excluded.date_value",
    )
    .bind::<Text, _>(account)
    .execute(conn)?;
    // The event names' totals, as the fold worker would leave them.
    sql_query(
        "INSERT INTO contact_event_totals (account_id, slug, count, last_seen) \
         SELECT account_id, slug, count(*), max(occurred_at) FROM contact_events \
         WHERE account_id = $1::uuid GROUP BY account_id, slug",
    )
    .bind::<Text, _>(account)
    .execute(conn)?;
    conn.batch_execute("SET synchronous_commit = on; SET session_replication_role = origin")?;
    Ok(events as u64)
}

/// The reference: the same attributes as one typed column each, every column indexed the
/// way its condition needs (strings by lower(), like the API's case-insensitive compare).
fn build_flat_table(conn: &mut PgConnection, account: &str) -> Result<()> {
    conn.batch_execute(
        "DROP TABLE IF EXISTS bench_flat;
         CREATE TABLE bench_flat (
             id uuid PRIMARY KEY,
             plan text, score double precision, vip boolean, renewal timestamptz, city text,
             signed_up timestamptz, opened_email timestamptz, purchased timestamptz
         );",
    )?;
    sql_query(
        "INSERT INTO bench_flat \
         SELECT contact_id, \
                max(string_value) FILTER (WHERE slug = 'plan'), \
                max(number_value) FILTER (WHERE slug = 'score'), \
                bool_or(bool_value) FILTER (WHERE slug = 'vip'), \
                max(date_value) FILTER (WHERE slug = 'renewal'), \
                max(string_value) FILTER (WHERE slug = 'city'), \
                max(date_value) FILTER (WHERE slug = 'event.signed_up'), \
                max(date_value) FILTER (WHERE slug = 'event.opened_email'), \
                max(date_value) FILTER (WHERE slug = 'event.purchased') \
         FROM contact_attributes WHERE account_id = $1::uuid GROUP BY contact_id",
    )
    .bind::<Text, _>(account)
    .execute(conn)?;
    conn.batch_execute(
        "CREATE INDEX ON bench_flat (lower(plan));
         CREATE INDEX ON bench_flat (score);
         CREATE INDEX ON bench_flat (vip);
         CREATE INDEX ON bench_flat (renewal);
         CREATE INDEX ON bench_flat (lower(city));
         CREATE INDEX ON bench_flat (signed_up);
         CREATE INDEX ON bench_flat (opened_email);
         CREATE INDEX ON bench_flat (purchased);",
    )?;
    Ok(())
}
