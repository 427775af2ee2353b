//! Process plumbing for tests that run the real `mailroom` binary as separate processes:
//! a [`Deployment`] (a database of its own, a loopback SMTP test server, an API-only
//! `mailroom serve`, a user made by `mailroom user create`, an account with a mail server
//! and a template), worker processes to start, kill (SIGKILL) and stop (SIGTERM), and
//! the API calls the tests make.
//!
//! Every process writes its stderr (its logs) to a file in the test's scratch directory;
//! when a test panics, the tail of each process's log is printed, so a failure shows what
//! the processes were doing. Processes still running at the end are killed and reaped.
//! With `KEEP_PROCESS_LOGS` set, the scratch directories (and the logs in them) are kept
//! under `target/tmp/` after the test.

#![allow(dead_code)] // Each test binary uses a different part.

use std::{
    collections::HashMap,
    fmt::Write as _,
    fs,
    net::TcpListener,
    os::unix::process::ExitStatusExt,
    path::PathBuf,
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use base64::Engine as _;
use mailroom_test_support::{ReceivedMessage, TestDatabase, TestSmtpOptions, TestSmtpServer};
use reqwest::Method;
use serde_json::{json, Value};

/// The binary under test, built by Cargo for this package's integration tests.
pub const MAILROOM: &str = env!("CARGO_BIN_EXE_mailroom");

/// The SMTP timeout the processes run with (`MAILROOM_SMTP_TIMEOUT`): long enough that a
/// loaded two-core CI machine does not time sessions out, short enough to allow a short
/// lease.
pub const SMTP_TIMEOUT: Duration = Duration::from_secs(5);

/// The message lease the processes run with: the default (`MAILROOM_MESSAGE_LEASE` is
/// left unset), renewed by the worker while it holds a message. Messages a killed
/// worker held are claimed again about this long after the kill.
pub const MESSAGE_LEASE: Duration = mailroom_server::config::DEFAULT_MESSAGE_LEASE;

/// The log line `mailroom worker` writes once its loops run (crates/server/src/workers.rs).
const WORKERS_STARTED: &str = "workers started";

/// These tests start several processes, each with its own database pool, and saturate the
/// machine while they run; one at a time keeps their figures meaningful. (nextest runs
/// each test in its own process; `.config/nextest.toml` puts them in a test group of one.
/// This lock does the same under `cargo test`.)
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A scratch working directory under Cargo's target tmp dir, removed at the end (so no
/// `.mailroom/` appears in the repository).
pub struct ScratchDir {
    pub path: PathBuf,
}

impl ScratchDir {
    pub fn new(test: &str) -> Self {
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "{test}-{}-{}",
            std::process::id(),
            uuid::Uuid::now_v7().simple()
        ));
        fs::create_dir_all(&path).expect("creating a scratch directory");
        Self { path }
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if std::env::var_os("KEEP_PROCESS_LOGS").is_none() {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

/// A `mailroom` command with a clean environment of its own: no inherited `MAILROOM_*`,
/// the test database, a fixed key, private egress (the SMTP server is on loopback), and
/// the short SMTP timeout and lease.
pub fn mailroom_command(dir: &ScratchDir, database: &TestDatabase) -> Command {
    let mut command = Command::new(MAILROOM);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("MAILROOM_") {
            command.env_remove(name);
        }
    }
    command
        .current_dir(&dir.path)
        .env("DATABASE_URL", database.url())
        .env(
            "MAILROOM_SECRET_KEY",
            base64::engine::general_purpose::STANDARD.encode([7u8; 32]),
        )
        .env("MAILROOM_ALLOW_PRIVATE_EGRESS", "true")
        .env("MAILROOM_SMTP_TIMEOUT", SMTP_TIMEOUT.as_secs().to_string())
        .env("MAILROOM_DB_POOL_SIZE", "12")
        .env("MAILROOM_LOG", "info")
        .stdin(Stdio::null());
    command
}

/// One running `mailroom` process with its log file.
pub struct Process {
    pub name: String,
    child: Child,
    log: PathBuf,
    exited: Option<ExitStatus>,
}

impl Process {
    /// Starts `command` with stdout discarded and stderr into `<dir>/<name>.log` (each
    /// start of the same name appends, so a restarted worker's log keeps its history).
    pub fn spawn(name: &str, dir: &ScratchDir, mut command: Command) -> Self {
        let log = dir.path.join(format!("{name}.log"));
        let file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("opening a process log");
        let child = command
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Self {
            name: name.to_owned(),
            child,
            log,
            exited: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the process logged so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Panics (with the log) when the process has exited.
    pub fn assert_running(&mut self) {
        if let Some(status) = self.poll() {
            panic!(
                "{} exited unexpectedly ({}); log:\n{}",
                self.name,
                describe(status),
                tail(&self.log(), 60)
            );
        }
    }

    fn poll(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().expect("polling a process");
        }
        self.exited
    }

    /// Waits until the log contains `line`, failing if the process exits or `within`
    /// passes first.
    pub async fn wait_for_log(&mut self, line: &str, within: Duration) {
        let started = Instant::now();
        while !self.log().contains(line) {
            self.assert_running();
            assert!(
                started.elapsed() < within,
                "{} did not log {line:?} within {within:?}; log:\n{}",
                self.name,
                tail(&self.log(), 60)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGKILL: the process gets no chance to finish anything. Returns once it is reaped.
    pub fn kill(&mut self) {
        self.assert_running();
        self.child.kill().expect("SIGKILL");
        let status = self.child.wait().expect("reaping a killed process");
        assert_eq!(
            status.signal(),
            Some(9),
            "{} was not killed by SIGKILL",
            self.name
        );
        self.exited = Some(status);
    }

    /// SIGTERM: asks for a graceful stop. Does not wait.
    pub fn terminate(&mut self) {
        self.assert_running();
        let pid = self.pid().to_string();
        // `kill(1)`: the workspace forbids `unsafe`, so no direct `libc::kill`.
        let status = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("running kill");
        assert!(status.success(), "`kill -TERM {pid}` failed: {status}");
    }

    /// Waits for the process to exit; panics with its log if it is still running after
    /// `within`.
    pub async fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.poll() {
                return status;
            }
            assert!(
                started.elapsed() < within,
                "{} still running {within:?} after it was asked to stop; log:\n{}",
                self.name,
                tail(&self.log(), 60)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- {} (pid {}) log, last lines ----\n{}",
                self.name,
                self.pid(),
                tail(&self.log(), 40)
            );
        }
        if self.poll().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => status.to_string(),
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding a free port");
    listener.local_addr().expect("local address").port()
}

/// A contact's address in these tests: the number makes the expected set easy to build.
pub fn contact_email(number: usize) -> String {
    format!("contact-{number:06}@example.com")
}

/// What the SMTP server saw of one announcement.
#[derive(Debug, Default)]
pub struct Deliveries {
    /// Accepted messages (a duplicate counts each time).
    pub total: usize,
    /// Accepted messages per recipient.
    pub per_recipient: HashMap<String, usize>,
    /// Accepted messages per EHLO name (each worker process has its own).
    pub per_hello: HashMap<String, usize>,
}

impl Deliveries {
    pub fn of(messages: &[ReceivedMessage]) -> Self {
        let mut deliveries = Self::default();
        for message in messages {
            deliveries.total += 1;
            *deliveries
                .per_hello
                .entry(message.hello.clone())
                .or_default() += 1;
            for recipient in &message.recipients {
                *deliveries
                    .per_recipient
                    .entry(recipient.clone())
                    .or_default() += 1;
            }
        }
        deliveries
    }

    /// Deliveries beyond the first per recipient.
    pub fn duplicates(&self) -> usize {
        self.per_recipient.values().map(|n| n - 1).sum()
    }

    /// Asserts that contacts `1..=count` each received at least one message and nobody
    /// else received any; with `exactly_once`, exactly one.
    pub fn assert_every_contact_reached(&self, count: usize, exactly_once: bool) {
        let mut problems = String::new();
        for number in 1..=count {
            let email = contact_email(number);
            match self.per_recipient.get(&email) {
                None => writeln!(problems, "{email}: no message").unwrap(),
                Some(&n) if exactly_once && n != 1 => {
                    writeln!(problems, "{email}: {n} messages").unwrap();
                }
                Some(_) => {}
            }
            if problems.lines().count() >= 20 {
                break;
            }
        }
        let strangers = self.per_recipient.len().saturating_sub(count);
        assert!(
            problems.is_empty() && self.per_recipient.len() == count,
            "{} recipients for {count} contacts ({strangers} unexpected); first problems:\n{problems}",
            self.per_recipient.len()
        );
    }
}

/// An account of the deployment's user, ready to send: its id and its template's.
#[derive(Debug, Clone)]
pub struct Tenant {
    pub account: String,
    pub template: String,
}

/// A database, an SMTP test server, an API-only `mailroom serve`, and an account ready to
/// send: a mail server on the SMTP server and a template.
pub struct Deployment {
    // Field order is drop order: processes stop before the database is dropped.
    pub api: Process,
    pub smtp: TestSmtpServer,
    pub base: String,
    pub http: reqwest::Client,
    pub token: String,
    pub account: String,
    pub template: String,
    pub dir: ScratchDir,
    pub database: TestDatabase,
    _one_at_a_time: tokio::sync::MutexGuard<'static, ()>,
}

impl Deployment {
    /// Starts everything and sets up the account through the API, as an operator and a
    /// customer would: `mailroom user create`, then `POST /v2/accounts`, a mail server (the
    /// API probes it) and a template.
    pub async fn start(test: &str, smtp: TestSmtpOptions) -> Self {
        let one_at_a_time = ONE_AT_A_TIME.lock().await;
        Self::start_with(test, smtp, TestDatabase::create(), one_at_a_time).await
    }

    /// [`Deployment::start`] on `database`: one on a PostgreSQL server of the test's own
    /// (`TestDatabase::create_on`), which the test may stop or crash.
    pub async fn start_on(test: &str, smtp: TestSmtpOptions, database: TestDatabase) -> Self {
        let one_at_a_time = ONE_AT_A_TIME.lock().await;
        Self::start_with(test, smtp, database, one_at_a_time).await
    }

    async fn start_with(
        test: &str,
        smtp: TestSmtpOptions,
        database: TestDatabase,
        one_at_a_time: tokio::sync::MutexGuard<'static, ()>,
    ) -> Self {
        let dir = ScratchDir::new(test);
        let smtp = TestSmtpServer::start(smtp);
        let port = free_port();
        let mut api_command = mailroom_command(&dir, &database);
        api_command
            .arg("serve")
            .env("MAILROOM_LISTEN", format!("127.0.0.1:{port}"))
            .env("MAILROOM_WORKERS", "false")
            // Per-request lines would drown the log shown on failure.
            .env("MAILROOM_LOG", "warn");
        let mut api = Process::spawn("api", &dir, api_command);
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(120))
            .build()
            .expect("HTTP client");
        let started = Instant::now();
        loop {
            api.assert_running();
            match http.get(format!("{base}/readyz")).send().await {
                Ok(response) if response.status() == 200 => break,
                _ => {
                    assert!(
                        started.elapsed() < Duration::from_secs(60),
                        "the API did not become ready within 60 s; log:\n{}",
                        api.log()
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }

        let created = mailroom_command(&dir, &database)
            .args(["user", "create", "--email", "ops@example.com"])
            .output()
            .expect("running `mailroom user create`");
        assert!(
            created.status.success(),
            "`mailroom user create` failed: {}",
            String::from_utf8_lossy(&created.stderr)
        );
        let created: Value =
            serde_json::from_slice(&created.stdout).expect("`mailroom user create` prints JSON");
        let token = created["token"].as_str().expect("a token").to_owned();

        let mut deployment = Self {
            api,
            smtp,
            base,
            http,
            token,
            account: String::new(),
            template: String::new(),
            dir,
            database,
            _one_at_a_time: one_at_a_time,
        };
        let smtp_port = deployment.smtp.port();
        let acme = deployment.add_tenant("Acme", smtp_port).await;
        deployment.account = acme.account;
        deployment.template = acme.template;
        deployment
    }

    /// Starts `mailroom worker` as `name`, which is also its EHLO name
    /// (`MAILROOM_SMTP_HELLO_NAME`), and waits until its loops run.
    pub async fn start_worker(&self, name: &str) -> Process {
        let mut command = mailroom_command(&self.dir, &self.database);
        command.arg("worker").env("MAILROOM_SMTP_HELLO_NAME", name);
        let mut worker = Process::spawn(name, &self.dir, command);
        // A restarted worker appends to its old log: wait for one more start line.
        let before = worker.log().matches(WORKERS_STARTED).count();
        let started = Instant::now();
        while worker.log().matches(WORKERS_STARTED).count() <= before {
            worker.assert_running();
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{name} did not start its workers within 60 s; log:\n{}",
                tail(&worker.log(), 60)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        worker
    }

    /// Another account of the same user (`POST /v2/accounts`), with a mail server on the
    /// SMTP server at `smtp_port` and a template, as the deployment's own account has.
    pub async fn add_tenant(&self, name: &str, smtp_port: u16) -> Tenant {
        let account = self
            .call(Method::POST, "/v2/accounts", Some(json!({"name": name})))
            .await;
        let account = account["_id"].as_str().expect("account id").to_owned();
        let path = |rest: &str| format!("/v2/accounts/{account}{rest}");
        self.call(
            Method::POST,
            &path("/mail-servers"),
            Some(json!({
                "serviceType": "smtp", "host": "127.0.0.1", "port": smtp_port,
                "secure": false, "requireTLS": false, "user": "", "password": "",
                "defaultFromEmail": "hello@acme.example", "defaultFromName": name
            })),
        )
        .await;
        let template = self
            .call(
                Method::POST,
                &path("/templates"),
                Some(json!({
                    "name": "News", "slug": "news", "subject": "News for {{ email }}",
                    "content": "<p>Hello {{ email }}</p>"
                })),
            )
            .await;
        let template = template["_id"].as_str().expect("template id").to_owned();
        Tenant { account, template }
    }

    /// The deployment's own account as a [`Tenant`].
    pub fn tenant(&self) -> Tenant {
        Tenant {
            account: self.account.clone(),
            template: self.template.clone(),
        }
    }

    /// A call to the API expecting 200 and a JSON body.
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = response.status();
        let text = response.text().await.expect("a response body");
        assert_eq!(status, 200, "{method} {path} answered {status}: {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e})"))
    }

    /// [`Deployment::call`] under `/v2/accounts/{account}`.
    pub async fn account_call(&self, method: Method, rest: &str, body: Option<Value>) -> Value {
        let path = format!("/v2/accounts/{}{rest}", self.account);
        self.call(method, &path, body).await
    }

    /// Imports contacts `1..=count` with one CSV upload (`POST …/contacts/import`).
    pub async fn import_contacts(&self, count: usize) {
        self.import_contacts_of(&self.tenant(), count).await;
    }

    /// [`Deployment::import_contacts`] into `tenant`.
    pub async fn import_contacts_of(&self, tenant: &Tenant, count: usize) {
        let mut csv = String::with_capacity(32 * (count + 1));
        csv.push_str("email\n");
        for number in 1..=count {
            csv.push_str(&contact_email(number));
            csv.push('\n');
        }
        let response = self
            .http
            .post(format!(
                "{}/v2/accounts/{}/contacts/import",
                self.base, tenant.account
            ))
            .bearer_auth(&self.token)
            .header("content-type", "text/csv")
            .body(csv)
            .send()
            .await
            .expect("POST …/contacts/import");
        let status = response.status();
        let report: Value = response.json().await.expect("an import report");
        assert_eq!(status, 200, "the import answered {status}: {report}");
        assert_eq!(report["created"], count, "import report: {report}");
        assert_eq!(
            self.call(
                Method::GET,
                &format!("/v2/accounts/{}/contacts/count", tenant.account),
                None
            )
            .await["count"],
            count
        );
    }

    /// Creates (and so starts) an announcement of the template to every subscribed
    /// contact; returns its id.
    pub async fn announce(&self) -> String {
        self.announce_of(&self.tenant()).await
    }

    /// [`Deployment::announce`] of `tenant`'s template to its contacts.
    pub async fn announce_of(&self, tenant: &Tenant) -> String {
        let created = self
            .call(
                Method::POST,
                &format!("/v2/accounts/{}/announcements", tenant.account),
                Some(json!({
                    "name": "Launch", "templateId": tenant.template,
                    "includeUnsubscribed": false
                })),
            )
            .await;
        assert_eq!(created["status"], "running", "{created}");
        created["_id"].as_str().expect("announcement id").to_owned()
    }

    pub async fn announcement(&self, id: &str) -> Value {
        self.announcement_of(&self.tenant(), id).await
    }

    /// `tenant`'s announcement `id`.
    pub async fn announcement_of(&self, tenant: &Tenant, id: &str) -> Value {
        self.call(
            Method::GET,
            &format!("/v2/accounts/{}/announcements/{id}", tenant.account),
            None,
        )
        .await
    }

    /// The ids of every message in `status` (`GET …/messages?status=…`, page by page).
    pub async fn message_ids(&self, status: &str) -> Vec<String> {
        let mut ids = Vec::new();
        loop {
            let page = self
                .account_call(
                    Method::GET,
                    &format!("/messages?status={status}&start={}&limit=100", ids.len()),
                    None,
                )
                .await;
            let items = page["items"].as_array().expect("items").clone();
            ids.extend(
                items
                    .iter()
                    .map(|item| item["_id"].as_str().expect("message id").to_owned()),
            );
            if items.len() < 100 {
                return ids;
            }
        }
    }

    /// `GET …/messages/count?status=…`.
    pub async fn message_count(&self, status: &str) -> u64 {
        self.message_count_of(&self.tenant(), status).await
    }

    /// [`Deployment::message_count`] of `tenant`.
    pub async fn message_count_of(&self, tenant: &Tenant, status: &str) -> u64 {
        self.call(
            Method::GET,
            &format!(
                "/v2/accounts/{}/messages/count?status={status}",
                tenant.account
            ),
            None,
        )
        .await["count"]
            .as_u64()
            .expect("a count")
    }

    /// Today's `sent` counter of `GET …/messages/stats`.
    pub async fn sent_today(&self) -> u64 {
        let days = self
            .account_call(Method::GET, "/messages/stats", None)
            .await;
        days.as_array()
            .and_then(|days| days.last())
            .and_then(|today| today["sent"].as_u64())
            .unwrap_or_else(|| panic!("no today in the stats: {days}"))
    }

    /// Waits until the SMTP server accepted at least `count` messages, checking that
    /// every given process keeps running.
    pub async fn wait_for_deliveries(
        &self,
        count: usize,
        processes: &mut [&mut Process],
        within: Duration,
    ) {
        let started = Instant::now();
        while self.smtp.message_count() < count {
            for process in processes.iter_mut() {
                process.assert_running();
            }
            assert!(
                started.elapsed() < within,
                "only {} of {count} messages arrived within {within:?}",
                self.smtp.message_count()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until the announcement is `completed`, checking that every given process
    /// keeps running; returns the announcement.
    pub async fn wait_for_completion(
        &self,
        id: &str,
        processes: &mut [&mut Process],
        within: Duration,
    ) -> Value {
        self.wait_for_completion_of(&self.tenant(), id, processes, within)
            .await
    }

    /// [`Deployment::wait_for_completion`] of `tenant`'s announcement.
    pub async fn wait_for_completion_of(
        &self,
        tenant: &Tenant,
        id: &str,
        processes: &mut [&mut Process],
        within: Duration,
    ) -> Value {
        let started = Instant::now();
        loop {
            let announcement = self.announcement_of(tenant, id).await;
            if announcement["status"] == "completed" {
                return announcement;
            }
            for process in processes.iter_mut() {
                process.assert_running();
            }
            assert!(
                started.elapsed() < within,
                "the announcement is not completed after {within:?} ({} messages arrived): {announcement}",
                self.smtp.message_count()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Asserts that no message is left `queued` or `sending`.
    pub async fn assert_every_message_final(&self) {
        self.assert_every_message_final_of(&self.tenant()).await;
    }

    /// [`Deployment::assert_every_message_final`] of `tenant`.
    pub async fn assert_every_message_final_of(&self, tenant: &Tenant) {
        for status in ["queued", "sending"] {
            assert_eq!(
                self.message_count_of(tenant, status).await,
                0,
                "messages still {status}"
            );
        }
    }
}

/// A count from the environment (`name`), else `default`: lets a machine with time to
/// spare run the full sizes where CI runs smaller ones.
pub fn count_from_env(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a whole number, got {text:?}")),
        Err(_) => default,
    }
}
