//! Process plumbing for the reliability tests that run the real `mailroom` binary: a
//! private PostgreSQL cluster a test may stop and start at will (never the shared server
//! on 127.0.0.1:5432, which other tests use), the `mailroom serve` process, and the
//! bootstrap of a user, an account, a loopback mail server and a template over HTTP.
//!
//! Used by `pg_restart.rs`, `pg_kill.rs` and `load.rs`; not every test uses every helper.
#![allow(dead_code)]

use std::{
    fs,
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use base64::Engine as _;
use serde_json::{json, Value};

pub const MAILROOM: &str = env!("CARGO_BIN_EXE_mailroom");
const SUPERUSER: &str = "postgres";

pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding a free port");
    listener.local_addr().expect("local address").port()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

/// The directory holding `initdb` and `pg_ctl`: the one `initdb` on PATH resolves into
/// (so both come from one installation), else Debian's newest `/usr/lib/postgresql/N/bin`.
fn server_binaries() -> Option<PathBuf> {
    let usable = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    let from_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("initdb"))
            .find(|initdb| initdb.is_file())
            .and_then(|initdb| fs::canonicalize(initdb).ok())
            .and_then(|real| real.parent().map(Path::to_path_buf))
    });
    let mut debian: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    debian.sort_by_key(|(version, _)| std::cmp::Reverse(*version));
    from_path
        .into_iter()
        .chain(debian.into_iter().map(|(_, dir)| dir))
        .find(|dir| usable(dir))
}

/// A throwaway PostgreSQL cluster in a temporary directory on a free port, run as
/// `postgres` through `runuser` when the test runs as root (PostgreSQL refuses root).
/// Stopped (immediately) and deleted on drop.
pub struct PrivateCluster {
    root: PathBuf,
    data_dir: PathBuf,
    log_file: PathBuf,
    binaries: PathBuf,
    port: u16,
    as_postgres: bool,
}

impl PrivateCluster {
    /// Creates and starts a cluster, or says why it cannot (no server binaries; not root
    /// and no way to run them). The test decides whether that is a skip or a failure.
    pub fn start() -> Result<Self, String> {
        let binaries = server_binaries().ok_or(
            "no PostgreSQL server binaries (initdb, pg_ctl) on PATH or in /usr/lib/postgresql",
        )?;
        let as_postgres = is_root();
        if as_postgres && !Path::new("/usr/sbin/runuser").exists() && which("runuser").is_none() {
            return Err(
                "running as root, but `runuser` is missing to run PostgreSQL as `postgres`".into(),
            );
        }
        // Under /tmp, not target/: as root, `postgres` must be able to enter every
        // directory above the data directory.
        let root = std::env::temp_dir().join(format!(
            "mailroom-pg-{}-{}",
            std::process::id(),
            uuid::Uuid::now_v7().simple()
        ));
        let cluster = Self {
            data_dir: root.join("data"),
            log_file: root.join("postgres.log"),
            root,
            binaries,
            port: free_port(),
            as_postgres,
        };
        fs::create_dir_all(&cluster.data_dir).map_err(|e| format!("creating the data dir: {e}"))?;
        fs::write(&cluster.log_file, "").map_err(|e| format!("creating the log: {e}"))?;
        if as_postgres {
            let chown = Command::new("chown")
                .arg("-R")
                .arg(format!("{SUPERUSER}:"))
                .arg(&cluster.root)
                .status()
                .map_err(|e| format!("running chown: {e}"))?;
            if !chown.success() {
                return Err(format!("chown of {} failed", cluster.root.display()));
            }
        }
        let initdb = cluster
            .tool("initdb")
            .arg("-D")
            .arg(&cluster.data_dir)
            .args(["-U", SUPERUSER, "--auth=trust", "-E", "UTF8"])
            .args(["--locale=C.UTF-8", "--no-sync"])
            .output()
            .map_err(|e| format!("running initdb: {e}"))?;
        if !initdb.status.success() {
            return Err(format!("initdb failed: {}", describe_output(&initdb)));
        }
        cluster.start_server()?;
        Ok(cluster)
    }

    fn tool(&self, name: &str) -> Command {
        let program = self.binaries.join(name);
        let mut command = if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", SUPERUSER, "--"]).arg(program);
            command
        } else {
            Command::new(program)
        };
        command.current_dir(&self.root).stdin(Stdio::null());
        command
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Writes `contents` to `name` in the data directory, readable by the server's user
    /// alone (as PostgreSQL wants its TLS key).
    pub fn write_private_file(&self, name: &str, contents: &str) -> Result<(), String> {
        use std::os::unix::fs::PermissionsExt;
        let path = self.data_dir.join(name);
        fs::write(&path, contents).map_err(|e| format!("writing {name}: {e}"))?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("chmod {name}: {e}"))?;
        if self.as_postgres {
            let chown = Command::new("chown")
                .arg(format!("{SUPERUSER}:"))
                .arg(&path)
                .status()
                .map_err(|e| format!("running chown: {e}"))?;
            if !chown.success() {
                return Err(format!("chown of {name} failed"));
            }
        }
        Ok(())
    }

    pub fn url(&self, database: &str) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{database}", self.port)
    }

    /// `pg_ctl start -w`: returns once the server accepts connections.
    pub fn start_server(&self) -> Result<(), String> {
        // The socket goes into the data directory (its own, short path); durability is
        // kept on (fsync) since the restart test checks that acknowledged writes survive.
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c max_connections=200",
            self.port,
            self.data_dir.display()
        );
        let output = self
            .tool("pg_ctl")
            .arg("start")
            .arg("-D")
            .arg(&self.data_dir)
            .arg("-l")
            .arg(&self.log_file)
            .args(["-w", "-t", "60", "-o", &options])
            .output()
            .map_err(|e| format!("running pg_ctl start: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "pg_ctl start failed: {}\n{}",
                describe_output(&output),
                self.log_tail()
            ))
        }
    }

    /// `pg_ctl stop -m <mode> -w` (`fast` disconnects clients, `immediate` crashes).
    pub fn stop_server(&self, mode: &str) -> Result<(), String> {
        let output = self
            .tool("pg_ctl")
            .arg("stop")
            .arg("-D")
            .arg(&self.data_dir)
            .args(["-m", mode, "-w", "-t", "60"])
            .output()
            .map_err(|e| format!("running pg_ctl stop: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!("pg_ctl stop failed: {}", describe_output(&output)))
        }
    }

    /// SIGKILL to the postmaster and every process it started, at once, as the kernel's
    /// OOM killer or `kill -9` of the whole server would: no shutdown, no checkpoint, no
    /// write of anything the server had not yet written. (What the kernel had already been
    /// given survives, as it would not in a power cut; what the server promises is that
    /// each commit it acknowledged was flushed to the WAL first, and the restart replays
    /// it.) Returns the number of processes killed, once every one of them is gone.
    pub fn kill_server(&self) -> Result<usize, String> {
        let pid_file = fs::read_to_string(self.data_dir.join("postmaster.pid"))
            .map_err(|e| format!("reading postmaster.pid: {e}"))?;
        let postmaster: u32 = pid_file
            .lines()
            .next()
            .and_then(|line| line.trim().parse().ok())
            .ok_or_else(|| format!("no pid in postmaster.pid: {pid_file:?}"))?;
        // Stopped first, so it starts no backend between the listing and the kill.
        signal("STOP", &[postmaster])?;
        let mut victims = children_of(postmaster);
        victims.push(postmaster);
        signal("KILL", &victims)?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while victims.iter().any(|pid| is_alive(*pid)) {
            if Instant::now() > deadline {
                return Err(format!("processes {victims:?} outlived SIGKILL by 30 s"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(victims.len())
    }

    pub fn log_tail(&self) -> String {
        let log = fs::read_to_string(&self.log_file).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        format!(
            "last lines of the PostgreSQL log:\n{}",
            lines[lines.len().saturating_sub(20)..].join("\n")
        )
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = self.stop_server("immediate");
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// `kill -<name> <pids>` (the workspace forbids `unsafe`, so no direct `libc::kill`).
fn signal(name: &str, pids: &[u32]) -> Result<(), String> {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .args(pids.iter().map(u32::to_string))
        .status()
        .map_err(|e| format!("running kill: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`kill -{name} {pids:?}` failed: {status}"))
    }
}

/// The direct children of `pid` (of each of its threads).
fn children_of(pid: u32) -> Vec<u32> {
    let mut children = Vec::new();
    for task in fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let listed = fs::read_to_string(task.path().join("children")).unwrap_or_default();
        children.extend(
            listed
                .split_whitespace()
                .filter_map(|child| child.parse::<u32>().ok()),
        );
    }
    children
}

/// Whether `pid` is still a live process (not gone, not a zombie waiting to be reaped).
fn is_alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    })
}

fn describe_output(output: &Output) -> String {
    format!(
        "{}; stdout: {}; stderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout).trim(),
        String::from_utf8_lossy(&output.stderr).trim()
    )
}

/// A working directory of the test's own under Cargo's target tmp dir, removed at the end.
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
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// `mailroom` with a clean environment: `database_url`, a fixed key, loopback egress
/// allowed, no API rate limit, warnings only, and a scratch working directory.
pub fn mailroom(dir: &ScratchDir, database_url: &str) -> Command {
    let mut command = Command::new(MAILROOM);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("MAILROOM_") {
            command.env_remove(name);
        }
    }
    command
        .current_dir(&dir.path)
        .env("DATABASE_URL", database_url)
        .env(
            "MAILROOM_SECRET_KEY",
            base64::engine::general_purpose::STANDARD.encode([7u8; 32]),
        )
        .env("MAILROOM_ALLOW_PRIVATE_EGRESS", "true")
        .env("MAILROOM_RATE_LIMIT_PER_SECOND", "off")
        .env("MAILROOM_LOG", "warn");
    command
}

/// A `mailroom serve` process (API and workers), killed and reaped when dropped.
pub struct Server {
    pub child: Child,
    pub base: String,
    stderr_path: PathBuf,
}

impl Server {
    /// Starts `mailroom serve` and waits (up to 60 s) for `/healthz` to answer 200.
    pub async fn start(dir: &ScratchDir, database_url: &str, extra_env: &[(&str, &str)]) -> Self {
        let port = free_port();
        let stderr_path = dir.path.join("serve.stderr");
        let stderr = fs::File::create(&stderr_path).expect("creating the server's stderr file");
        let mut command = mailroom(dir, database_url);
        command
            .arg("serve")
            .env("MAILROOM_LISTEN", format!("127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        for (name, value) in extra_env {
            command.env(name, value);
        }
        let mut server = Self {
            child: command.spawn().expect("starting `mailroom serve`"),
            base: format!("http://127.0.0.1:{port}"),
            stderr_path,
        };
        let client = client();
        let started = Instant::now();
        loop {
            server.assert_running();
            match client.get(format!("{}/healthz", server.base)).send().await {
                Ok(response) if response.status() == 200 => return server,
                _ if started.elapsed() > Duration::from_secs(60) => panic!(
                    "`mailroom serve` did not answer on /healthz within 60 s; stderr:\n{}",
                    server.stderr()
                ),
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    pub fn stderr(&self) -> String {
        fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Panics (with the server's stderr) when the process has exited.
    pub fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().expect("polling the server") {
            panic!(
                "`mailroom serve` exited ({status}); stderr:\n{}",
                self.stderr()
            );
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// An HTTP client whose every request is bounded by 5 s: a hang shows up as an error.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .pool_max_idle_per_host(128)
        .build()
        .expect("HTTP client")
}

/// `mailroom user create`, returning the token.
pub fn create_user(dir: &ScratchDir, database_url: &str, email: &str) -> String {
    let output = mailroom(dir, database_url)
        .args(["user", "create", "--email", email])
        .stdin(Stdio::null())
        .output()
        .expect("running `mailroom user create`");
    assert!(
        output.status.success(),
        "`mailroom user create` failed: {}",
        describe_output(&output)
    );
    let created: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    created["token"].as_str().expect("token").to_owned()
}

/// An account with a plain-SMTP mail server on loopback `smtp_port` and the
/// `order-receipt` template; returns the account id and the template id.
pub async fn create_sending_account(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    smtp_port: u16,
) -> (String, String) {
    let account = post_ok(
        client,
        &format!("{base}/v2/accounts"),
        token,
        &json!({"name": "Acme"}),
    )
    .await;
    let account = account["_id"].as_str().expect("account id").to_owned();
    let server = json!({
        "serviceType": "smtp", "host": "127.0.0.1", "port": smtp_port,
        "secure": false, "requireTLS": false, "user": "", "password": "",
        "defaultFromEmail": "hello@acme.example", "defaultFromName": "Acme"
    });
    post_ok(
        client,
        &format!("{base}/v2/accounts/{account}/mail-servers"),
        token,
        &server,
    )
    .await;
    let template = json!({
        "name": "Receipt", "slug": "order-receipt",
        "subject": "Your receipt", "content": "<p>Total: {{ total }}</p>"
    });
    let template = post_ok(
        client,
        &format!("{base}/v2/accounts/{account}/templates"),
        token,
        &template,
    )
    .await;
    let template = template["_id"].as_str().expect("template id").to_owned();
    (account, template)
}

/// POSTs JSON and expects 200, returning the body.
pub async fn post_ok(client: &reqwest::Client, url: &str, token: &str, body: &Value) -> Value {
    let response = client
        .post(url)
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    let status = response.status();
    let text = response.text().await.expect("body");
    assert_eq!(status, 200, "POST {url} answered {status}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The percentile `p` (0..=100) of sorted durations.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let index = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}
