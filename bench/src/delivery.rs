//! `mailroom-bench delivery [--messages N]`: the message outbox drained by the real worker
//! process (`mailroom worker`) through Postfix's `smtp-sink` on loopback, beside
//! `smtp-source` → `smtp-sink` (the physical reference) with the same message size and
//! connection count.
//!
//! `cargo xtask bench delivery` unpacks `smtp-sink` and `smtp-source` from Debian's
//! postfix package (the daemon is never started), builds `mailroom` in release mode and
//! passes both locations: `MAILROOM_BENCH_POSTFIX` (the unpacked tree) and
//! `MAILROOM_BENCH_BIN` (the `mailroom` binary).
//!
//! Setup goes through the API (account, mail server, template) and bulk SQL (N contacts
//! and N queued messages of about 5 KB, committed at once). One run prints every figure
//! below beside the reference measured in the same run: the end-to-end rate at 8
//! connections and at 1 as ratios to `smtp-source`, the worker's CPU time per message
//! (its own and its render children's user + system time, from `/proc`), PostgreSQL time
//! per message (`pg_stat_statements` when the server can load it, else the database's
//! `pg_stat_database.active_time`; the output says which), the RSS growth per 10,000
//! queued, and the latency from a transactional `POST` to the SMTP server's `DATA` on an
//! idle worker (p50, p99; with the API's share and that phase's statements). Each drain
//! also prints the cores kept busy and by whom (worker, PostgreSQL's processes, the
//! rest), which says whether a rate is bound by CPU, and what the drain cost the
//! database's durability: commits, WAL bytes and WAL fsyncs per message ([`crate::wal`]).
//! Targets, on a database with production durability: ≥ 0.5 × raw at 8 connections,
//! ≥ 0.8 × at 1, ≤ 100 µs CPU and ≤ 100 µs PostgreSQL per message, ≤ 2 MB per 10,000
//! queued, p50 ≤ 100 ms.
//!
//! Before the engine runs, the mailer alone ([`crate::mailer_alone`]) sends prepared
//! messages straight to `smtp-sink`, with and without `PIPELINING` offered, in
//! interleaved rounds: what the SMTP client itself costs per message, measured apart from
//! the database's noise. `--no-pipelining` runs the engine itself against a sink without
//! `PIPELINING` (`smtp-sink -p`).

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, Context, Result};
use diesel::{
    connection::SimpleConnection,
    pg::PgConnection,
    sql_query,
    sql_types::{BigInt, Double, Text},
    QueryableByName, RunQueryDsl,
};
use mailroom_app::users::{bootstrap_user, BootstrapRequest};
use mailroom_server::{Application, Config};
use mailroom_test_support::TestDatabase;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::comparison::{Figure, Goal};
use crate::cpu::{process_cpu, CpuSplit, MachineCpu};
use crate::stats::{ms, ratio, thousands, verdict, Latencies};
use crate::wal::{WalCounters, WalPhase, READING_TRANSACTIONS};

const USAGE: &str = "\
Usage: mailroom-bench delivery [--messages N] [--single M] [--latency K] [--no-pipelining]
                                [--random-ids]

  delivery      queue N messages of about 5 KB (default 100000) to distinct contacts and
                drain them with `mailroom worker` through smtp-sink on loopback, beside
                smtp-source → smtp-sink; then M messages (default min(N, 20000)) over a
                single connection; then K transactional sends (default 100) to an idle
                worker, timed from the POST to the SMTP server's DATA.
  --no-pipelining
                Mailroom's smtp-sink does not offer PIPELINING (RFC 2920), so the worker
                sends one command at a time, as to a server without it; the reference's
                smtp-sink is unchanged.
  --random-ids  the queued contacts and messages get random (version 4) ids, as this
                bench wrote them until 2026-11-29; by default their ids rise with time,
                like the UUIDv7 ids Mailroom itself makes.
";

/// The secret key the in-process API and the worker process share.
const SECRET_KEY: [u8; 32] = [7u8; 32];
/// The worker's SMTP connections per server in the main run (the production default).
const CONNECTIONS: usize = mailroom_server::config::DEFAULT_SMTP_CONNECTIONS_PER_SERVER;
/// About 5 KB per message: the rendered body's size.
pub const BODY_BYTES: usize = 5_000;

struct Options {
    messages: u64,
    single: Option<u64>,
    latency_samples: usize,
    /// Whether Mailroom's smtp-sink offers PIPELINING.
    pipelining: bool,
    /// Whether queued contacts and messages get random ids instead of time-ordered ones.
    random_ids: bool,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        messages: 100_000,
        single: None,
        latency_samples: 100,
        pipelining: true,
        random_ids: false,
    };
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        if flag == "--no-pipelining" {
            options.pipelining = false;
            continue;
        }
        if flag == "--random-ids" {
            options.random_ids = true;
            continue;
        }
        let value = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number: u64 = value
            .parse()
            .map_err(|_| format!("{flag} needs a whole number, got `{value}`"))?;
        match flag.as_str() {
            "--messages" if number >= 100 => options.messages = number,
            "--single" if number >= 100 => options.single = Some(number),
            "--messages" | "--single" => return Err(format!("{flag} must be at least 100")),
            "--latency" if (10..=10_000).contains(&number) => {
                options.latency_samples = usize::try_from(number).unwrap_or(100);
            }
            "--latency" => return Err("--latency must be 10 to 10000".into()),
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    Ok(options)
}

/// Entry point from `main`: parses `args` (after `delivery`) and runs.
pub fn main(args: &[String]) -> std::process::ExitCode {
    let options = match parse(args) {
        Ok(options) => options,
        Err(message) => {
            eprint!("{USAGE}");
            eprintln!("mailroom-bench: {message}");
            return std::process::ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("mailroom-bench: cannot start the runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&options)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("mailroom-bench: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

struct Tools {
    sink: PathBuf,
    source: PathBuf,
    libraries: PathBuf,
    mailroom: PathBuf,
}

impl Tools {
    fn from_env() -> Result<Self> {
        let postfix = PathBuf::from(std::env::var("MAILROOM_BENCH_POSTFIX").context(
            "MAILROOM_BENCH_POSTFIX is not set: run the benchmark with `cargo xtask bench delivery`",
        )?);
        let mailroom = PathBuf::from(
            std::env::var("MAILROOM_BENCH_BIN")
                .context("MAILROOM_BENCH_BIN is not set: run `cargo xtask bench delivery`")?,
        );
        let tools = Self {
            sink: postfix.join("usr/sbin/smtp-sink"),
            source: postfix.join("usr/sbin/smtp-source"),
            libraries: postfix.join("usr/lib/postfix"),
            mailroom,
        };
        for path in [&tools.sink, &tools.source, &tools.mailroom] {
            if !path.exists() {
                bail!("{} is missing", path.display());
            }
        }
        Ok(tools)
    }

    fn postfix(&self, program: &Path) -> Command {
        let mut command = Command::new(program);
        command.env("LD_LIBRARY_PATH", &self.libraries);
        command
    }
}

/// `smtp-sink` on a free loopback port, killed on drop.
struct Sink {
    child: Child,
    port: u16,
}

impl Sink {
    /// `pipelining: false` leaves PIPELINING out of its EHLO reply (`-p`).
    fn start(tools: &Tools, pipelining: bool) -> Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut command = tools.postfix(&tools.sink);
        if !pipelining {
            command.arg("-p");
        }
        // -u: the user to run as when started by root (the postfix user may not exist).
        let child = command
            .args(["-u", "nobody", &format!("127.0.0.1:{port}"), "1024"])
            .stdout(Stdio::null())
            .spawn()
            .context("starting smtp-sink")?;
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if started.elapsed() > Duration::from_secs(5) {
                bail!("smtp-sink did not listen on {port}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Self { child, port })
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `mailroom worker` process, with its resource readings from `/proc`.
struct Worker {
    child: Child,
}

impl Worker {
    fn start(tools: &Tools, url: &str, connections: usize) -> Result<Self> {
        use base64::Engine as _;
        let child = Command::new(&tools.mailroom)
            .arg("worker")
            .env("DATABASE_URL", url)
            .env(
                "MAILROOM_SECRET_KEY",
                base64::engine::general_purpose::STANDARD.encode(SECRET_KEY),
            )
            .env("MAILROOM_ALLOW_PRIVATE_EGRESS", "true")
            .env(
                "MAILROOM_SMTP_CONNECTIONS_PER_SERVER",
                connections.to_string(),
            )
            .env("MAILROOM_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .context("starting mailroom worker")?;
        Ok(Self { child })
    }

    fn status_kb(&self, field: &str) -> Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        status
            .lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| anyhow!("no {field} in /proc/…/status"))
    }

    /// Resident memory now, in MB.
    fn rss_mb(&self) -> Result<f64> {
        Ok(self.status_kb("VmRSS:")? as f64 / 1024.0)
    }

    /// The most resident memory so far, in MB.
    fn peak_rss_mb(&self) -> Result<f64> {
        Ok(self.status_kb("VmHWM:")? as f64 / 1024.0)
    }

    /// CPU time so far: the worker's own user plus system time (what `getrusage` reports
    /// for it, read from `/proc/<pid>/stat`) and that of its render children
    /// (`mailroom render-sandbox`, long-lived, so read live the same way; children that
    /// ended are in the worker's `cutime`/`cstime`).
    fn cpu(&self) -> Result<WorkerCpu> {
        let pid = self.child.id();
        let own = process_cpu(pid).ok_or_else(|| anyhow!("no /proc/{pid}/stat"))?;
        let children: Duration = descendants(pid)
            .into_iter()
            .filter_map(|child| process_cpu(child).map(|cpu| cpu.own))
            .sum();
        Ok(WorkerCpu {
            worker: own.own,
            render: children + own.waited_children,
        })
    }
}

/// CPU time of the worker process and of its render children.
#[derive(Debug, Clone, Copy, Default)]
struct WorkerCpu {
    worker: Duration,
    render: Duration,
}

impl WorkerCpu {
    fn since(self, before: Self) -> Self {
        Self {
            worker: self.worker.saturating_sub(before.worker),
            render: self.render.saturating_sub(before.render),
        }
    }

    fn total(self) -> Duration {
        self.worker + self.render
    }
}

/// Every process below `pid` (children of each of its threads, recursively).
fn descendants(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut todo = vec![pid];
    while let Some(parent) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{parent}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                found.push(child);
                todo.push(child);
            }
        }
    }
    found
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn run(options: &Options) -> Result<()> {
    let tools = Tools::from_env()?;
    let database = tokio::task::spawn_blocking(TestDatabase::create)
        .await
        .context("creating the database")?;
    let outcome = measure(options, &tools, database.url()).await;
    tokio::task::spawn_blocking(move || drop(database)).await?;
    outcome
}

#[derive(QueryableByName)]
struct CountRow {
    #[diesel(sql_type = BigInt)]
    count: i64,
}

#[derive(QueryableByName)]
struct MillisRow {
    #[diesel(sql_type = Double)]
    ms: f64,
}

#[derive(QueryableByName)]
struct StatementRow {
    #[diesel(sql_type = BigInt)]
    calls: i64,
    #[diesel(sql_type = Double)]
    total_ms: f64,
    #[diesel(sql_type = Double)]
    max_ms: f64,
    #[diesel(sql_type = Text)]
    query: String,
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// The bench's own statements carry this comment, so the PostgreSQL time of the worker
/// can leave them out.
const BENCH_MARK: &str = "/* bench */";

/// Where the PostgreSQL time per message comes from.
enum PgClock {
    /// `pg_stat_statements`: the execution time of every statement run in the bench's
    /// database, less the bench's own.
    Statements,
    /// `pg_stat_database.active_time` of the bench's database (time its backends spent
    /// executing statements, PostgreSQL 14 and later), when `pg_stat_statements` cannot be
    /// loaded (it needs `shared_preload_libraries`, set when the server starts): it also
    /// counts the bench's own cheap progress reads, and a backend reports it when it
    /// ends or goes idle, so it is read after the worker has stopped.
    ActiveTime(String),
}

impl PgClock {
    fn detect(sql: &mut PgConnection) -> Self {
        let created = sql
            .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .and_then(|()| {
                sql_query(format!(
                    "{BENCH_MARK} SELECT count(*) AS count FROM pg_stat_statements"
                ))
                .get_result::<CountRow>(sql)
            });
        match created {
            Ok(_) => Self::Statements,
            Err(error) => {
                let why = error.to_string();
                Self::ActiveTime(why.lines().next().unwrap_or_default().to_owned())
            }
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Statements => "pg_stat_statements (total_exec_time of the bench database, \
                                 the bench's own statements left out)"
                .to_owned(),
            Self::ActiveTime(why) => format!(
                "pg_stat_database.active_time of the bench database (pg_stat_statements is \
                 not loadable on this server: {why})"
            ),
        }
    }

    /// PostgreSQL milliseconds spent on the bench database so far.
    fn reading(&self, sql: &mut PgConnection) -> Result<f64> {
        let query = match self {
            Self::Statements => format!(
                "{BENCH_MARK} SELECT coalesce(sum(total_exec_time), 0)::float8 AS ms \
                 FROM pg_stat_statements \
                 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
                   AND query NOT LIKE '%{BENCH_MARK}%'"
            ),
            Self::ActiveTime(_) => format!(
                "{BENCH_MARK} SELECT coalesce(active_time, 0)::float8 AS ms \
                 FROM pg_stat_database WHERE datname = current_database()"
            ),
        };
        // A new snapshot of the statistics, not the one this transaction saw first.
        sql.batch_execute("SELECT pg_stat_clear_snapshot()")?;
        Ok(sql_query(query).get_result::<MillisRow>(sql)?.ms)
    }

    /// Forgets the statements counted so far, so [`PgClock::top_statements`] shows the next
    /// phase alone (the figures per phase are read before, as differences).
    fn reset(&self, sql: &mut PgConnection) -> Result<()> {
        if matches!(self, Self::Statements) {
            sql.batch_execute(&format!("{BENCH_MARK} SELECT pg_stat_statements_reset()"))?;
        }
        Ok(())
    }

    /// Prints the statements that took the most time since the last reset.
    fn print_top_statements(&self, sql: &mut PgConnection, count: usize) -> Result<()> {
        let top = self.top_statements(sql, count)?;
        if top.is_empty() {
            return Ok(());
        }
        report!("  top statements (pg_stat_statements):");
        for row in top {
            let query: String = row.query.split_whitespace().collect::<Vec<_>>().join(" ");
            let query: String = query.chars().take(100).collect();
            report!(
                "    {:>9.0} ms {:>9} calls {:>8.1} µs/call (max {:>8.1})  {query}",
                row.total_ms,
                row.calls,
                row.total_ms * 1000.0 / row.calls.max(1) as f64,
                row.max_ms * 1000.0,
            );
        }
        Ok(())
    }

    /// The statements that took the most time in the bench database since the last reset.
    fn top_statements(&self, sql: &mut PgConnection, count: usize) -> Result<Vec<StatementRow>> {
        if !matches!(self, Self::Statements) {
            return Ok(Vec::new());
        }
        Ok(sql_query(format!(
            "{BENCH_MARK} SELECT calls, total_exec_time::float8 AS total_ms, \
             max_exec_time::float8 AS max_ms, query \
             FROM pg_stat_statements \
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
               AND query NOT LIKE '%{BENCH_MARK}%' \
             ORDER BY total_exec_time DESC LIMIT {count}"
        ))
        .load(sql)?)
    }
}

async fn measure(options: &Options, tools: &Tools, url: &str) -> Result<()> {
    let sink = Sink::start(tools, true)?;
    report!(
        "== Reference: smtp-source → smtp-sink, {} messages of {} bytes ({} cores, load {})",
        thousands(options.messages),
        BODY_BYTES,
        std::thread::available_parallelism().map_or(0, usize::from),
        load()
    );
    let reference = smtp_source(tools, sink.port, options.messages, CONNECTIONS)?;
    report!("  {CONNECTIONS} connections          {reference:>10.0} messages/s");
    let single_count = options.single.unwrap_or(options.messages.min(20_000));
    let reference_single = smtp_source(tools, sink.port, single_count, 1)?;
    report!("  1 connection           {reference_single:>10.0} messages/s");
    let stepwise_sink = Sink::start(tools, false)?;
    crate::mailer_alone::compare(
        (sink.port, sink.child.id()),
        (stepwise_sink.port, stepwise_sink.child.id()),
        single_count,
        CONNECTIONS,
    )?;

    let api = Api::start(url).await?;
    let mailroom_port = if options.pipelining {
        sink.port
    } else {
        stepwise_sink.port
    };
    let bench = api.account("Delivery bench", mailroom_port).await?;
    // The bench's own statements may read every shard on Citus.
    let mut sql = mailroom_test_support::assertion_connection(url);
    let clock = PgClock::detect(&mut sql);
    report!("  PostgreSQL time from   {}", clock.describe());

    report!(
        "\n== Mailroom: `mailroom worker` ({CONNECTIONS} connections per server) → smtp-sink{}",
        if options.pipelining {
            ""
        } else {
            " without PIPELINING"
        }
    );
    let worker = Worker::start(tools, url, CONNECTIONS)?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle = worker.rss_mb()?;
    report!("  idle worker RSS        {idle:>10.1} MB");
    let main_batch = QueueBatch {
        first: 0,
        count: options.messages,
        random_ids: options.random_ids,
    };
    let drained = drain(&mut sql, url, &bench, worker, &clock, main_batch).await?;
    let growth = (drained.peak_rss - idle) / (options.messages as f64 / 10_000.0);
    drained.print(options.messages);
    report!("  worker peak RSS        {:>10.1} MB", drained.peak_rss);
    // The peak over idle is the worker's working set under load (held messages, their
    // renders, the SMTP sessions, the allocator's arenas): about the same whatever the
    // count, so the figure per 10,000 falls as the run grows. Both are printed.
    report!(
        "  RSS growth             {growth:>10.2} MB per 10,000 queued ({:.1} MB over {} queued)",
        drained.peak_rss - idle,
        thousands(options.messages)
    );
    report!("  load after             {:>10}", load());
    clock.print_top_statements(&mut sql, 8)?;

    report!(
        "\n== Mailroom over a single connection: {} messages",
        thousands(single_count)
    );
    let worker = Worker::start(tools, url, 1)?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let single_batch = QueueBatch {
        first: options.messages,
        count: single_count,
        random_ids: options.random_ids,
    };
    let single = drain(&mut sql, url, &bench, worker, &clock, single_batch).await?;
    single.print(single_count);

    report!(
        "\n== Transactional POST → the SMTP server's DATA, idle worker ({} sends, {CONNECTIONS} connections)",
        options.latency_samples
    );
    clock.reset(&mut sql)?;
    let (latencies, answered) = post_to_data(tools, url, &api, options.latency_samples).await?;
    report!(
        "  p50 {}, p99 {}, max {}",
        ms(latencies.percentile(50.0)),
        ms(latencies.percentile(99.0)),
        ms(latencies.percentile(100.0))
    );
    report!(
        "  of which the POST's answer p50 {}, p99 {}",
        ms(answered.percentile(50.0)),
        ms(answered.percentile(99.0)),
    );
    clock.print_top_statements(&mut sql, 6)?;

    let cpu_per_message = drained.cpu.total().as_secs_f64() * 1e6 / options.messages as f64;
    let pg_per_message = drained.pg_ms * 1000.0 / options.messages as f64;
    report!(
        "\n== Targets (load {}; {})",
        load(),
        crate::durability::measured_with()
    );
    report!(
        "  ≥ 0.5 × raw, {CONNECTIONS} conns.  {:>10}  {} ({:.0} vs {:.0} messages/s)",
        ratio(drained.rate, reference),
        verdict(drained.rate >= 0.5 * reference),
        drained.rate,
        reference
    );
    report!(
        "  ≥ 0.8 × raw, 1 conn.   {:>10}  {} ({:.0} vs {:.0} messages/s)",
        ratio(single.rate, reference_single),
        verdict(single.rate >= 0.8 * reference_single),
        single.rate,
        reference_single
    );
    report!(
        "  ≤ 100 µs CPU/message   {:>10.1}  {}",
        cpu_per_message,
        verdict(cpu_per_message <= 100.0)
    );
    report!(
        "  ≤ 100 µs PG/message    {:>10.1}  {}",
        pg_per_message,
        verdict(pg_per_message <= 100.0)
    );
    report!(
        "  ≤ 2 MB per 10,000      {:>10.2}  {}",
        growth,
        verdict(growth <= 2.0)
    );
    report!(
        "  POST→DATA p50 ≤ 100 ms {:>10}  {} (p99 {})",
        ms(latencies.percentile(50.0)),
        verdict(latencies.percentile(50.0) <= Duration::from_millis(100)),
        ms(latencies.percentile(99.0))
    );
    report!(
        "  idle RSS < 20 MB       {:>10.1}  {}",
        idle,
        verdict(idle < 20.0)
    );
    crate::comparison::record("delivery_8", drained.rate);
    crate::comparison::record("delivery_1", single.rate);
    crate::comparison::record("delivery_cpu", cpu_per_message);
    crate::comparison::record("post_to_data_p50", ms_of(latencies.percentile(50.0)));
    crate::comparison::print(&[
        Figure {
            name: "delivery_8",
            label: "delivery, 8 connections, msg/s",
            target: Goal::AtLeast(0.7),
        },
        Figure {
            name: "delivery_1",
            label: "delivery, 1 connection, msg/s",
            target: Goal::None,
        },
        Figure {
            name: "delivery_cpu",
            label: "worker CPU per message, µs",
            target: Goal::None,
        },
        Figure {
            name: "post_to_data_p50",
            label: "POST → DATA p50, ms",
            target: Goal::None,
        },
    ]);
    drop(sink);
    Ok(())
}

/// `duration` in milliseconds.
fn ms_of(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// The bench message's HTML after its greeting: about [`BODY_BYTES`] of filler
/// paragraphs on one line, so lettre sends it quoted-printable, as most real HTML (long
/// or minified lines) is.
pub fn filler_paragraphs() -> String {
    let filler = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. ";
    let paragraphs = BODY_BYTES / (filler.len() + 7);
    format!("<p>{filler}</p>").repeat(paragraphs)
}

/// Messages per second of `smtp-source`: `count` messages of about [`BODY_BYTES`] over
/// `sessions` connections, each kept open for its next message (`-d`).
fn smtp_source(tools: &Tools, port: u16, count: u64, sessions: usize) -> Result<f64> {
    let started = Instant::now();
    let status = tools
        .postfix(&tools.source)
        .args([
            "-d",
            "-s",
            &sessions.to_string(),
            "-m",
            &count.to_string(),
            "-l",
            &BODY_BYTES.to_string(),
            "-f",
            "hello@bench.example",
            "-t",
            "reader@bench.example",
            &format!("127.0.0.1:{port}"),
        ])
        .stdout(Stdio::null())
        .status()
        .context("running smtp-source")?;
    if !status.success() {
        bail!("smtp-source failed ({status})");
    }
    Ok(count as f64 / started.elapsed().as_secs_f64())
}

struct Drained {
    rate: f64,
    cpu: WorkerCpu,
    pg_ms: f64,
    peak_rss: f64,
    /// The drain's wall time, and the machine's and PostgreSQL's processes' CPU in it: who
    /// kept the cores busy.
    elapsed: Duration,
    machine: MachineCpu,
    postgres: Duration,
    /// Commits, WAL and fsyncs from the commit of the queueing to the end of the drain
    /// (the readings a second and a half after the worker stopped).
    wal: WalPhase,
}

impl Drained {
    fn print(&self, count: u64) {
        let per_message = |duration: Duration| duration.as_secs_f64() * 1e6 / count as f64;
        report!("  messages/s             {:>10.0}", self.rate);
        report!(
            "  worker CPU             {:>10.2} s ({:.1} µs per message: worker {:.1}, render children {:.1})",
            self.cpu.total().as_secs_f64(),
            per_message(self.cpu.total()),
            per_message(self.cpu.worker),
            per_message(self.cpu.render),
        );
        report!(
            "  PostgreSQL time        {:>10.2} s ({:.1} µs per message)",
            self.pg_ms / 1000.0,
            self.pg_ms * 1000.0 / count as f64
        );
        // Cores kept busy on average over the drain, and by whom.
        let cores = |duration: Duration| duration.as_secs_f64() / self.elapsed.as_secs_f64();
        let worker = self.cpu.total();
        let rest = self
            .machine
            .busy
            .saturating_sub(worker)
            .saturating_sub(self.postgres);
        report!(
            "  cores busy             {:>10.2} of {:.2} (worker {:.2}, PostgreSQL's processes {:.2} \
             = {:.1} µs per message, the rest {:.2}: smtp-sink, the kernel's loopback, this bench)",
            cores(self.machine.busy),
            cores(self.machine.total),
            cores(worker),
            cores(self.postgres),
            per_message(self.postgres),
            cores(rest),
        );
        self.wal.print(count, "message");
    }
}

/// The messages one [`drain`] queues: `count` of them to new contacts numbered from
/// `first`.
struct QueueBatch {
    first: u64,
    count: u64,
    /// Random (version 4) ids for the contacts and messages instead of time-ordered ones.
    random_ids: bool,
}

impl QueueBatch {
    /// The `start` row whose `ms` the time-ordered ids count from: the millisecond the
    /// statement reads it (each of the two inserts reads its own).
    const START: &'static str =
        "(SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms) AS start";

    /// The SQL expression of the id of the `n`th contact or message. Mailroom's ids are
    /// UUIDv7: they rise with time, so a batch's rows sit together in every index keyed by
    /// id, and a row's new index entries (a record is never heap-only) land on a few
    /// leaf pages. Random ids put each on a page of its own, which the bench wrote until
    /// 2026-11-29 (`--random-ids` keeps that case). Here the 48-bit time field is the
    /// queueing's millisecond plus `n`, the version nibble is 7, and the rest is random.
    fn id(&self) -> &'static str {
        if self.random_ids {
            "gen_random_uuid()"
        } else {
            "encode(set_byte(overlay(uuid_send(gen_random_uuid()) \
                 PLACING substring(int8send(start.ms + n) FROM 3) FROM 1 FOR 6), \
                 6, (112 + n % 16)::int), 'hex')::uuid"
        }
    }
}

/// Queues `count` messages to new contacts in one transaction (on a connection of its
/// own, closed before the measurement starts), then waits until `worker` has sent them
/// all; the rate runs from the commit to the last `sent`. Stops the worker at the end, so
/// its database sessions have reported their time when PostgreSQL's is read.
async fn drain(
    sql: &mut PgConnection,
    url: &str,
    bench: &BenchAccount,
    worker: Worker,
    clock: &PgClock,
    batch: QueueBatch,
) -> Result<Drained> {
    let (offset, count) = (batch.first, batch.count);
    let sent = |sql: &mut PgConnection| -> Result<i64> {
        Ok(sql_query(format!(
            "{BENCH_MARK} SELECT coalesce(sum(sent + failed + bounced), 0)::bigint AS count \
             FROM message_stats_daily WHERE account_id = '{}'",
            bench.account
        ))
        .get_result::<CountRow>(sql)?
        .count)
    };
    let settled_before = sent(sql)?;
    let queued = Instant::now();
    let statement = format!(
        "{BENCH_MARK} WITH new_contacts AS (
             INSERT INTO contacts (account_id, id, email, created_at, message_count)
             SELECT '{account}', {id}, 'reader' || n || '@bench.example', now(), 0
             FROM generate_series({from}, {to}) AS n,
                  {start}
             RETURNING id, email
         )
         INSERT INTO messages (account_id, id, contact_id, email, template_id, kind, status,
                               data, message_id_header, next_attempt_at, created_at, updated_at)
         SELECT '{account}', id, contact_id, email, '{template}', 'transactional',
                'queued', '{{\"first_name\": \"Ada\"}}'::jsonb,
                '<' || id || '@bench.example>', now(), now(), now()
         FROM (SELECT {id} AS id, contact_id, email
               FROM (SELECT id AS contact_id, email,
                            split_part(substr(email, 7), '@', 1)::bigint AS n
                     FROM new_contacts) AS c,
                    {start}
               ORDER BY n) AS m",
        id = batch.id(),
        start = QueueBatch::START,
        account = bench.account,
        template = bench.template,
        from = offset,
        to = offset + count - 1,
    );
    {
        let mut queueing = mailroom_test_support::assertion_connection(url);
        sql_query(statement)
            .execute(&mut queueing)
            .context("queueing messages")?;
        // The account's lane, due now, as the repository brings it forward with every
        // message it queues.
        sql_query(format!(
            "{BENCH_MARK} INSERT INTO delivery_lanes AS lane (account_id, next_due_at) \
             VALUES ('{}', now()) ON CONFLICT (account_id) DO UPDATE \
             SET next_due_at = least(lane.next_due_at, EXCLUDED.next_due_at)",
            bench.account
        ))
        .execute(&mut queueing)
        .context("bringing the lane forward")?;
        // Left to itself, the queueing session reports its statistics as it ends, after
        // the client has let go of it, and the clock read next could count the queueing
        // as the drain's. A forced flush is done before
        // this statement's answer comes back (PostgreSQL 15 and later; older servers
        // refuse the call, and the race stays).
        let _ = sql_query(format!("{BENCH_MARK} SELECT pg_stat_force_next_flush()"))
            .execute(&mut queueing);
    }
    report!(
        "  queued {} in          {:>10.2} s",
        thousands(count),
        queued.elapsed().as_secs_f64()
    );
    let pg_before = clock.reading(sql)?;
    let wal_before = WalCounters::read(sql)?;
    let cpu_before = worker.cpu()?;
    let (machine_before, postgres_before) = (MachineCpu::now(), CpuSplit::now().postgres);
    let started = Instant::now();
    let limit = Duration::from_secs(60 + count / 100);
    let target = settled_before + i64::try_from(count)?;
    let mut progress_reads = 0;
    loop {
        progress_reads += 1;
        let settled = sent(sql)?;
        if settled >= target {
            break;
        }
        if started.elapsed() > limit {
            bail!(
                "{} messages still waiting after {} s",
                target - settled,
                limit.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed();
    let cpu = worker.cpu()?.since(cpu_before);
    let machine = MachineCpu::now().since(machine_before);
    let postgres = CpuSplit::now().postgres.saturating_sub(postgres_before);
    let peak_rss = worker.peak_rss_mb()?;
    drop(worker);
    // The worker's sessions report their statistics as they end.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let pg_ms = clock.reading(sql)? - pg_before;
    // The bench's own transactions between the readings, none of which writes: the
    // progress reads, the PostgreSQL clock's two and the readings' own.
    let own = progress_reads + 2 + 2 * READING_TRANSACTIONS;
    let mut wal = WalPhase::between(wal_before, WalCounters::read(sql)?, own);
    // Rates per second over the drain itself, not the pause after it.
    wal.elapsed = elapsed;
    let failed = sql_query(format!(
        "{BENCH_MARK} SELECT count(*) AS count FROM messages WHERE status <> 'sent'"
    ))
    .get_result::<CountRow>(sql)?
    .count;
    if failed > 0 {
        bail!("{failed} messages did not end `sent`");
    }
    Ok(Drained {
        rate: count as f64 / elapsed.as_secs_f64(),
        cpu,
        pg_ms,
        peak_rss,
        elapsed,
        machine,
        postgres,
        wal,
    })
}

/// Transactional sends through the API to an idle worker, one at a time with pauses
/// between them (so each finds the worker idle, at a different point of its poll): the
/// time from just before each `POST` to the moment the SMTP server reads `DATA`, and to
/// the moment the `POST` was answered (the part of it the API takes).
async fn post_to_data(
    tools: &Tools,
    url: &str,
    api: &Api,
    samples: usize,
) -> Result<(Latencies, Latencies)> {
    let mut server = DataClock::start().await?;
    let latency = api.account("Latency bench", server.port).await?;
    let worker = Worker::start(tools, url, CONNECTIONS)?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut latencies = Vec::with_capacity(samples);
    let mut answered = Vec::with_capacity(samples);
    for sample in 0..samples {
        // 50 to 250 ms apart, spread over the poll interval.
        let pause = 50 + (sample as u64 * 37) % 200;
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let posted = Instant::now();
        api.post(
            format!("/v2/accounts/{}/messages", latency.account),
            json!({
                "slug": LATENCY_SLUG,
                "email": format!("latency{sample}@bench.example"),
                "data": {"first_name": "Ada"}
            }),
        )
        .await?;
        answered.push(posted.elapsed());
        let arrived = tokio::time::timeout(Duration::from_secs(10), server.arrivals.recv())
            .await
            .context("no DATA within 10 s of the POST")?
            .context("the SMTP server stopped")?;
        latencies.push(arrived.saturating_duration_since(posted));
    }
    drop(worker);
    Ok((Latencies::new(latencies), Latencies::new(answered)))
}

/// A small SMTP server on loopback that accepts everything and reports the instant each
/// `DATA` command arrives.
struct DataClock {
    port: u16,
    arrivals: mpsc::UnboundedReceiver<Instant>,
}

impl DataClock {
    async fn start() -> Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let (arrived, arrivals) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let arrived = arrived.clone();
                tokio::spawn(async move {
                    let _ = smtp_session(stream, arrived).await;
                });
            }
        });
        Ok(Self { port, arrivals })
    }
}

async fn smtp_session(
    stream: tokio::net::TcpStream,
    arrived: mpsc::UnboundedSender<Instant>,
) -> std::io::Result<()> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    write.write_all(b"220 latency.bench ESMTP\r\n").await?;
    let mut line = Vec::new();
    loop {
        line.clear();
        if read.read_until(b'\n', &mut line).await? == 0 {
            return Ok(());
        }
        let command = String::from_utf8_lossy(&line).to_ascii_uppercase();
        let reply: &[u8] = if command.starts_with("EHLO") {
            b"250-latency.bench\r\n250-8BITMIME\r\n250 SIZE 10485760\r\n"
        } else if command.starts_with("DATA") {
            let _ = arrived.send(Instant::now());
            write.write_all(b"354 go ahead\r\n").await?;
            loop {
                line.clear();
                if read.read_until(b'\n', &mut line).await? == 0 {
                    return Ok(());
                }
                if line == b".\r\n" || line == b".\n" {
                    break;
                }
            }
            b"250 2.0.0 queued\r\n"
        } else if command.starts_with("QUIT") {
            write.write_all(b"221 bye\r\n").await?;
            return Ok(());
        } else {
            b"250 ok\r\n"
        };
        write.write_all(reply).await?;
    }
}

/// The in-process API the setup goes through.
pub struct Api {
    address: String,
    token: String,
    client: reqwest::Client,
}

/// An account with one mail server and one template.
pub struct BenchAccount {
    pub account: String,
    pub template: String,
}

/// The slug of the latency account's template.
const LATENCY_SLUG: &str = "bench-newsletter";

impl Api {
    pub async fn start(url: &str) -> Result<Self> {
        let mut config = Config::new(url, SECRET_KEY);
        config.listen = ([127, 0, 0, 1], 0).into();
        config.db_pool_size = 4;
        config.http_workers = 1;
        config.run_workers = false;
        config.allow_private_egress = true;
        let build_config = config.clone();
        let application =
            tokio::task::spawn_blocking(move || Application::build(&build_config)).await??;
        let address = format!("http://127.0.0.1:{}", application.port());
        let services = application.services();
        tokio::spawn(application.run_until_stopped());

        let bootstrap = BootstrapRequest {
            email: "bench@bench.example".into(),
            token_name: "bench".into(),
            expires_in_days: None,
        };
        let token = tokio::task::spawn_blocking(move || bootstrap_user(&services, bootstrap))
            .await??
            .token
            .raw
            .expose()
            .to_owned();
        Ok(Self {
            address,
            token,
            client: reqwest::Client::new(),
        })
    }

    pub async fn post(&self, path: String, body: Value) -> Result<Value> {
        let response = self
            .client
            .post(format!("{}{path}", self.address))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await?;
        let status = response.status();
        let body: Value = response.json().await.context("reading the API's answer")?;
        if !status.is_success() {
            bail!("the API answered {status}: {body}");
        }
        Ok(body)
    }

    /// A new account whose one mail server is the SMTP server on `smtp_port`, with a
    /// template of about [`BODY_BYTES`] once rendered.
    pub async fn account(&self, name: &str, smtp_port: u16) -> Result<BenchAccount> {
        let account = self
            .post("/v2/accounts".into(), json!({"name": name}))
            .await?;
        let account = account["_id"].as_str().context("account id")?.to_owned();
        self.post(
            format!("/v2/accounts/{account}/mail-servers"),
            json!({
                "serviceType": "smtp", "host": "127.0.0.1", "port": smtp_port,
                "secure": false, "requireTLS": false, "user": "", "password": "",
                "defaultFromEmail": "hello@bench.example", "defaultFromName": "Bench"
            }),
        )
        .await?;
        let content = format!("<p>Hello {{{{ first_name }}}},</p>{}", filler_paragraphs());
        let template = self
            .post(
                format!("/v2/accounts/{account}/templates"),
                json!({
                    "name": "Bench newsletter", "slug": LATENCY_SLUG,
                    "subject": "News for {{ first_name }}",
                    "content": content,
                    "clickTracking": false, "openTracking": false
                }),
            )
            .await?;
        let template = template["_id"].as_str().context("template id")?.to_owned();
        Ok(BenchAccount { account, template })
    }
}
