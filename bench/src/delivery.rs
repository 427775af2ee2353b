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
//! and N queued messages of about 5 KB, committed at once). Targets (issue 5): at least
//! 0.5 × the raw SMTP rate end to end, at least 1,500 messages/s over one connection, an
//! idle worker under 20 MB resident, under 2 MB more per 10,000 queued messages.

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, Context, Result};
use diesel::{
    pg::PgConnection, sql_query, sql_types::BigInt, Connection, QueryableByName, RunQueryDsl,
};
use mailroom_app::users::{bootstrap_user, BootstrapRequest};
use mailroom_server::{Application, Config};
use mailroom_test_support::TestDatabase;
use serde_json::{json, Value};

use crate::stats::{ratio, thousands, verdict};

const USAGE: &str = "\
Usage: mailroom-bench delivery [--messages N] [--single M]

  delivery      queue N messages of about 5 KB (default 100000) to distinct contacts and
                drain them with `mailroom worker` through smtp-sink on loopback, beside
                smtp-source → smtp-sink; then M messages (default min(N, 20000)) over a
                single connection.
";

/// The secret key the in-process API and the worker process share.
const SECRET_KEY: [u8; 32] = [7u8; 32];
/// The worker's SMTP connections per server in the main run (the production default).
const CONNECTIONS: usize = mailroom_server::config::DEFAULT_SMTP_CONNECTIONS_PER_SERVER;
/// About 5 KB per message: the rendered body's size.
const BODY_BYTES: usize = 5_000;

struct Options {
    messages: u64,
    single: Option<u64>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        messages: 100_000,
        single: None,
    };
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number: u64 = value
            .parse()
            .map_err(|_| format!("{flag} needs a whole number, got `{value}`"))?;
        match flag.as_str() {
            "--messages" if number >= 100 => options.messages = number,
            "--single" if number >= 100 => options.single = Some(number),
            "--messages" | "--single" => return Err(format!("{flag} must be at least 100")),
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
    fn start(tools: &Tools) -> Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        // -u: the user to run as when started by root (the postfix user may not exist).
        let child = tools
            .postfix(&tools.sink)
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

    /// User plus system CPU time so far.
    fn cpu(&self) -> Result<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))?;
        // Fields after the command name (which may hold spaces) start at `state`.
        let rest = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks =
            |index: usize| -> u64 { fields.get(index).and_then(|f| f.parse().ok()).unwrap_or(0) };
        // utime and stime are fields 14 and 15 of stat, 12 and 13 after `)`.
        let total = ticks(11) + ticks(12);
        Ok(Duration::from_secs_f64(total as f64 / clock_ticks()))
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100.0)
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

async fn measure(options: &Options, tools: &Tools, url: &str) -> Result<()> {
    let sink = Sink::start(tools)?;
    println!(
        "== Reference: smtp-source → smtp-sink, {} messages of {} bytes (load {})",
        thousands(options.messages),
        BODY_BYTES,
        load()
    );
    let reference = smtp_source(tools, sink.port, options.messages, CONNECTIONS)?;
    println!("  {CONNECTIONS} connections          {reference:>10.0} messages/s");
    let single_count = options.single.unwrap_or(options.messages.min(20_000));
    let reference_single = smtp_source(tools, sink.port, single_count, 1)?;
    println!("  1 connection           {reference_single:>10.0} messages/s");

    let api = Api::start(url, sink.port).await?;
    let mut sql = PgConnection::establish(url).context("connecting for setup")?;

    println!("\n== Mailroom: `mailroom worker` ({CONNECTIONS} connections per server) → smtp-sink");
    let worker = Worker::start(tools, url, CONNECTIONS)?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle = worker.rss_mb()?;
    println!("  idle worker RSS        {idle:>10.1} MB");
    let drained = drain(&mut sql, &api, &worker, 0, options.messages).await?;
    let peak = worker.peak_rss_mb()?;
    let growth = (peak - idle) / (options.messages as f64 / 10_000.0);
    println!("  messages/s             {:>10.0}", drained.rate);
    println!(
        "  worker CPU             {:>10.2} s ({:.0} µs per message)",
        drained.cpu.as_secs_f64(),
        drained.cpu.as_secs_f64() * 1e6 / options.messages as f64
    );
    println!("  worker peak RSS        {peak:>10.1} MB");
    println!("  RSS growth             {growth:>10.2} MB per 10,000 queued");
    println!("  load after             {:>10}", load());
    drop(worker);

    println!(
        "\n== Mailroom over a single connection: {} messages",
        thousands(single_count)
    );
    let worker = Worker::start(tools, url, 1)?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let single = drain(&mut sql, &api, &worker, options.messages, single_count).await?;
    println!("  messages/s             {:>10.0}", single.rate);
    println!(
        "  worker CPU             {:>10.2} s",
        single.cpu.as_secs_f64()
    );
    drop(worker);

    println!("\n== Targets (load {})", load());
    println!(
        "  ≥ 0.5 × raw SMTP       {:>10}  {}",
        ratio(drained.rate, reference),
        verdict(drained.rate >= 0.5 * reference)
    );
    println!(
        "  ≥ 1,500/s, one conn.   {:>10.0}  {}",
        single.rate,
        verdict(single.rate >= 1_500.0)
    );
    println!(
        "  idle RSS < 20 MB       {:>10.1}  {}",
        idle,
        verdict(idle < 20.0)
    );
    println!(
        "  < 2 MB per 10,000      {:>10.2}  {}",
        growth,
        verdict(growth < 2.0)
    );
    drop(sink);
    Ok(())
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
    cpu: Duration,
}

/// Queues `count` messages to new contacts in one transaction, then waits until the
/// worker has sent them all; the rate runs from the commit to the last `sent`.
async fn drain(
    sql: &mut PgConnection,
    api: &Api,
    worker: &Worker,
    offset: u64,
    count: u64,
) -> Result<Drained> {
    let queued = Instant::now();
    let statement = format!(
        "WITH new_contacts AS (
             INSERT INTO contacts (account_id, id, email, created_at, message_count)
             SELECT '{account}', gen_random_uuid(), 'reader' || n || '@bench.example', now(), 0
             FROM generate_series({from}, {to}) AS n
             RETURNING id, email
         )
         INSERT INTO messages (account_id, id, contact_id, email, template_id, kind, status,
                               data, message_id_header, next_attempt_at, created_at, updated_at)
         SELECT '{account}', gen_random_uuid(), id, email, '{template}', 'transactional',
                'queued', '{{\"first_name\": \"Ada\"}}'::jsonb,
                '<' || gen_random_uuid() || '@bench.example>', now(), now(), now()
         FROM new_contacts",
        account = api.account,
        template = api.template,
        from = offset,
        to = offset + count - 1,
    );
    sql_query(statement)
        .execute(sql)
        .context("queueing messages")?;
    println!(
        "  queued {} in          {:>10.2} s",
        thousands(count),
        queued.elapsed().as_secs_f64()
    );
    let cpu_before = worker.cpu()?;
    let started = Instant::now();
    let limit = Duration::from_secs(60 + count / 100);
    loop {
        let waiting = sql_query(
            "SELECT count(*) AS count FROM messages WHERE status IN ('queued', 'sending')",
        )
        .get_result::<CountRow>(sql)?
        .count;
        if waiting == 0 {
            break;
        }
        if started.elapsed() > limit {
            bail!(
                "{waiting} messages still waiting after {} s",
                limit.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = started.elapsed();
    let cpu = worker.cpu()?.saturating_sub(cpu_before);
    let failed = sql_query("SELECT count(*) AS count FROM messages WHERE status <> 'sent'")
        .get_result::<CountRow>(sql)?
        .count;
    if failed > 0 {
        bail!("{failed} messages did not end `sent`");
    }
    Ok(Drained {
        rate: count as f64 / elapsed.as_secs_f64(),
        cpu,
    })
}

/// The in-process API the setup goes through.
struct Api {
    account: String,
    template: String,
}

impl Api {
    async fn start(url: &str, sink_port: u16) -> Result<Self> {
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
        let client = reqwest::Client::new();
        let post = |path: String, body: Value| {
            let request = client
                .post(format!("{address}{path}"))
                .bearer_auth(&token)
                .json(&body);
            async move {
                let response = request.send().await?;
                let status = response.status();
                let body: Value = response.json().await.context("reading the API's answer")?;
                if !status.is_success() {
                    bail!("the API answered {status}: {body}");
                }
                Ok(body)
            }
        };
        let account = post("/v2/accounts".into(), json!({"name": "Delivery bench"})).await?;
        let account = account["_id"].as_str().context("account id")?.to_owned();
        post(
            format!("/v2/accounts/{account}/mail-servers"),
            json!({
                "serviceType": "smtp", "host": "127.0.0.1", "port": sink_port,
                "secure": false, "requireTLS": false, "user": "", "password": "",
                "defaultFromEmail": "hello@bench.example", "defaultFromName": "Bench"
            }),
        )
        .await?;
        // About 5 KB once rendered: a paragraph of filler repeated.
        let filler =
            "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. ";
        let paragraphs = BODY_BYTES / (filler.len() + 7);
        let content = format!(
            "<p>Hello {{{{ first_name }}}},</p>{}",
            format!("<p>{filler}</p>").repeat(paragraphs)
        );
        let template = post(
            format!("/v2/accounts/{account}/templates"),
            json!({
                "name": "Bench newsletter", "slug": "bench-newsletter",
                "subject": "News for {{ first_name }}",
                "content": content,
                "clickTracking": false, "openTracking": false
            }),
        )
        .await?;
        let template = template["_id"].as_str().context("template id")?.to_owned();
        Ok(Self { account, template })
    }
}
