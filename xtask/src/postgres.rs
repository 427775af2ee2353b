//! Finding a PostgreSQL for `up`, `test` and `ci`, and managing the private cluster.
//!
//! Discovery order (also in the usage text and the README):
//! 1. `DATABASE_URL` from the environment, used as is;
//! 2. a server on 127.0.0.1:5432 that lets the `postgres` role in without a password
//!    (checked with a startup handshake: a server that asks for a password, or has no
//!    such role, is reported in one line and skipped);
//! 3. a private cluster under `target/pgdata` on port 55432, created with the system's
//!    `initdb` and started with `pg_ctl`; as root, the server package is installed with
//!    apt-get when no `initdb` exists.
//!
//! A private cluster that xtask starts is stopped when the command ends, on success,
//! on failure and when xtask is interrupted. The last case needs care: xtask cannot
//! catch Ctrl-C without `unsafe`/libc, so the stopping is done by a small watchdog
//! process (`ClusterGuard`) that outlives xtask and acts when xtask's end of a pipe
//! closes, which the kernel does however xtask exits.

use std::env;
use std::fs;
use std::io::{BufRead, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::system::{self, note};
use crate::Result;

/// Name of the hidden subcommand that runs the watchdog (see [`ClusterGuard`]).
pub const GUARD_COMMAND: &str = "__pg-guard";

/// The database `mailroom serve` uses; the server creates it when missing.
const APP_DATABASE: &str = "mailroom";
/// The maintenance database tests connect to in order to create their own databases.
const MAINTENANCE_DATABASE: &str = "postgres";

const SYSTEM_SERVER_PORT: u16 = 5432;
/// Not 5432, so a private cluster can run next to a system server.
const PRIVATE_CLUSTER_PORT: u16 = 55432;
/// The benchmarks' durable private cluster, beside the fast one the tests use.
const DURABLE_CLUSTER_PORT: u16 = 55433;
/// The fast cluster's durability settings: off, for a throwaway development and test
/// cluster (per-test CREATE DATABASE is much faster without them).
pub const UNSAFE_FAST_OPTIONS: &str =
    "-c fsync=off -c synchronous_commit=off -c full_page_writes=off";
/// The superuser that `initdb -U` creates and that Debian's server runs as.
const SUPERUSER: &str = "postgres";
/// Setting this to `1` skips the 127.0.0.1:5432 probe, to exercise the private cluster
/// on a machine that has a system server.
const FORCE_PRIVATE_ENV: &str = "MAILROOM_XTASK_PRIVATE_PG";

/// What a PostgreSQL is wanted for, which decides the private cluster discovery falls
/// back to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// `up`, `test`, `ci`: the fast private cluster (`target/pgdata`, durability off).
    Development,
    /// `bench`: a private cluster with production durability (`target/pgdata-durable`,
    /// fsync, synchronous_commit and full_page_writes on), so no figure is measured on a
    /// database that would lose committed work in a power cut.
    DurableBenchmark,
    /// `bench --unsafe-fast-db`: the fast private cluster, whether or not a system server
    /// runs (unless `DATABASE_URL` names one), for comparison with the durable figures.
    UnsafeFastBenchmark,
}

impl Purpose {
    /// The private cluster this purpose falls back to.
    fn private_cluster(self) -> PrivateCluster {
        match self {
            Purpose::Development | Purpose::UnsafeFastBenchmark => PrivateCluster::new(),
            Purpose::DurableBenchmark => PrivateCluster::durable(),
        }
    }
}

/// Which PostgreSQL discovery picked.
enum Source {
    Environment(String),
    SystemServer,
    PrivateCluster { reason: String, port: u16 },
}

impl Source {
    /// Discovery without side effects: nothing is started or installed here.
    fn discover(purpose: Purpose) -> Self {
        if let Some(url) = env::var("DATABASE_URL").ok().filter(|url| !url.is_empty()) {
            return Source::Environment(url);
        }
        let port = purpose.private_cluster().port;
        if purpose == Purpose::UnsafeFastBenchmark {
            return Source::PrivateCluster {
                reason: "--unsafe-fast-db".to_owned(),
                port,
            };
        }
        if env::var(FORCE_PRIVATE_ENV).is_ok_and(|value| value == "1") {
            return Source::PrivateCluster {
                reason: "MAILROOM_XTASK_PRIVATE_PG=1".to_owned(),
                port,
            };
        }
        let address = SocketAddr::from(([127, 0, 0, 1], SYSTEM_SERVER_PORT));
        Self::from_probe(probe_trust(address, SUPERUSER, MAINTENANCE_DATABASE), port)
    }

    /// The system server when it lets the `postgres` role in, else the private cluster on
    /// `private_port` with the reason in words.
    fn from_probe(probe: Probe, private_port: u16) -> Self {
        let address = format!("127.0.0.1:{SYSTEM_SERVER_PORT}");
        let port = private_port;
        match probe {
            Probe::Trusted => Source::SystemServer,
            Probe::NotListening => Source::PrivateCluster {
                reason: format!("nothing listens on {address}"),
                port,
            },
            Probe::RefusedForAuth(why) => Source::PrivateCluster {
                reason: format!(
                    "the server on {address} refuses the `{SUPERUSER}` role without a password: {why}"
                ),
                port,
            },
            Probe::NotPostgres(why) => Source::PrivateCluster {
                reason: format!("what listens on {address} does not answer as PostgreSQL: {why}"),
                port,
            },
            // Anything else (starting up, too many connections) is the server's to fix;
            // it lets us in, so use it and let the real error surface there.
            Probe::OtherError(_) => Source::SystemServer,
        }
    }

    /// The URL for `database`, except that a URL from the environment is always used
    /// unchanged: whoever set it chose the database too.
    fn url(&self, database: &str) -> String {
        match self {
            Source::Environment(url) => url.clone(),
            Source::SystemServer => local_url(SYSTEM_SERVER_PORT, database),
            Source::PrivateCluster { port, .. } => local_url(*port, database),
        }
    }
}

pub fn local_url(port: u16, database: &str) -> String {
    format!("postgres://{SUPERUSER}@127.0.0.1:{port}/{database}")
}

/// What a PostgreSQL startup handshake as `user` found.
#[derive(Debug, PartialEq, Eq)]
enum Probe {
    /// Authentication succeeded without a password (trust, or peer-like rules).
    Trusted,
    /// The server asks for a password, or refused the role (no such role, no
    /// pg_hba.conf entry): the server's words or the method it asked for.
    RefusedForAuth(String),
    NotListening,
    /// Something answered, but not with the PostgreSQL protocol.
    NotPostgres(String),
    /// A PostgreSQL error that is not about authentication.
    OtherError(String),
}

/// Connects to `address` and sends a protocol 3.0 startup message for `user` and
/// `database`, then reads the answers: an authentication request (`R`; code 0 is
/// success, anything else wants a password or a ticket), then ReadyForQuery (`Z`:
/// trusted) or an error (`E`, whose SQLSTATE class 28 means the role was refused). The connection is closed without a query. Std
/// only, so xtask needs no PostgreSQL client library to choose a database.
fn probe_trust(address: SocketAddr, user: &str, database: &str) -> Probe {
    let timeout = Duration::from_secs(3);
    let Ok(mut stream) = TcpStream::connect_timeout(&address, timeout) else {
        return Probe::NotListening;
    };
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    let mut body = 196_608_i32.to_be_bytes().to_vec(); // protocol version 3.0
    for (key, value) in [("user", user), ("database", database)] {
        body.extend_from_slice(key.as_bytes());
        body.push(0);
        body.extend_from_slice(value.as_bytes());
        body.push(0);
    }
    body.push(0);
    let length = i32::try_from(body.len() + 4).expect("a startup message is small");
    let mut message = length.to_be_bytes().to_vec();
    message.extend_from_slice(&body);
    if let Err(error) = stream.write_all(&message) {
        return Probe::NotPostgres(format!("sending the startup message failed: {error}"));
    }
    // With trust, AuthenticationOk comes first and a missing role is only reported
    // after it, so read on until the server is ready for a query or says why not.
    let mut authenticated = false;
    let probe = loop {
        let (kind, payload) = match read_message(&mut stream) {
            Ok(message) => message,
            Err(why) => break Probe::NotPostgres(why),
        };
        match kind {
            b'R' if payload.len() >= 4 => {
                match i32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) {
                    0 => authenticated = true,
                    3 => break Probe::RefusedForAuth("it asks for a password (password)".into()),
                    5 => break Probe::RefusedForAuth("it asks for a password (md5)".into()),
                    10 => {
                        break Probe::RefusedForAuth(
                            "it asks for a password (scram-sha-256)".into(),
                        )
                    }
                    code => {
                        break Probe::RefusedForAuth(format!(
                            "it asks for authentication method {code}"
                        ))
                    }
                }
            }
            b'E' => {
                let (code, text) = error_fields(&payload);
                break if code.starts_with("28") {
                    Probe::RefusedForAuth(text)
                } else {
                    Probe::OtherError(format!("{text} (SQLSTATE {code})"))
                };
            }
            b'Z' if authenticated => break Probe::Trusted,
            // ParameterStatus, BackendKeyData, NoticeResponse, NegotiateProtocolVersion.
            b'S' | b'K' | b'N' | b'v' => {}
            other => {
                break Probe::NotPostgres(format!("a message of type {:?}", char::from(other)))
            }
        }
    };
    // Terminate: polite, and keeps the server log free of "unexpected EOF" lines.
    let _ = stream.write_all(&[b'X', 0, 0, 0, 4]);
    probe
}

/// One backend message: its type byte and body (at most 64 KiB, which the first
/// messages of a session never reach).
fn read_message(stream: &mut TcpStream) -> std::result::Result<(u8, Vec<u8>), String> {
    use std::io::Read;
    let mut header = [0_u8; 5];
    stream
        .read_exact(&mut header)
        .map_err(|error| format!("no complete answer: {error}"))?;
    let length = i32::from_be_bytes([header[1], header[2], header[3], header[4]]);
    let body_length = usize::try_from(length)
        .ok()
        .and_then(|length| length.checked_sub(4))
        .filter(|length| *length <= 64 * 1024)
        .ok_or_else(|| format!("a message length of {length}"))?;
    let mut body = vec![0_u8; body_length];
    stream
        .read_exact(&mut body)
        .map_err(|error| format!("a cut-off answer: {error}"))?;
    Ok((header[0], body))
}

/// The SQLSTATE (`C`) and message (`M`) fields of an ErrorResponse body.
fn error_fields(payload: &[u8]) -> (String, String) {
    let (mut code, mut text) = (String::new(), String::new());
    let mut rest = payload;
    while let Some((&field, tail)) = rest.split_first() {
        if field == 0 {
            break;
        }
        let end = tail
            .iter()
            .position(|byte| *byte == 0)
            .unwrap_or(tail.len());
        let value = String::from_utf8_lossy(&tail[..end]).into_owned();
        match field {
            b'C' => code = value,
            b'M' => text = value,
            _ => {}
        }
        rest = tail.get(end + 1..).unwrap_or_default();
    }
    (code, text)
}

pub fn accepts_tcp(port: u16) -> bool {
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&address, Duration::from_secs(1)).is_ok()
}

/// A running PostgreSQL chosen by discovery. If xtask started it, dropping this (or
/// calling [`Postgres::finish`]) stops it again.
pub struct Postgres {
    source: Source,
    guard: Option<ClusterGuard>,
}

impl Postgres {
    /// Discovers a PostgreSQL for development and tests, starts (and if needed creates)
    /// the private cluster when that is the choice, and prints one line saying which one
    /// is used.
    pub fn provide() -> Result<Self> {
        Self::provide_for(Purpose::Development)
    }

    /// [`Postgres::provide`], falling back to the private cluster `purpose` asks for.
    pub fn provide_for(purpose: Purpose) -> Result<Self> {
        let source = Source::discover(purpose);
        let guard = match &source {
            Source::Environment(url) => {
                note(&format!(
                    "PostgreSQL: DATABASE_URL from the environment ({})",
                    system::redact_password(url)
                ));
                None
            }
            Source::SystemServer => {
                note("PostgreSQL: the server on 127.0.0.1:5432");
                None
            }
            Source::PrivateCluster { reason, .. } => {
                let cluster = purpose.private_cluster();
                let binaries = cluster.binaries(InstallIfMissing::Yes)?;
                let (port, durability) = (cluster.port, cluster.durability());
                if cluster.is_running(&binaries) {
                    note(&format!(
                        "PostgreSQL: the private cluster in {} on 127.0.0.1:{port}, {durability} \
                         ({reason}; it was already running and is left running)",
                        cluster.data_dir.display()
                    ));
                    None
                } else {
                    // The guard goes first so that even an interrupted start is undone.
                    let guard = ClusterGuard::spawn(&binaries, &cluster)?;
                    cluster.start(&binaries)?;
                    note(&format!(
                        "PostgreSQL: a private cluster in {} on 127.0.0.1:{port}, {durability} \
                         ({reason}; started now, stopped when xtask ends)",
                        cluster.data_dir.display()
                    ));
                    Some(guard)
                }
            }
        };
        Ok(Postgres { source, guard })
    }

    /// The URL `mailroom serve` should use.
    pub fn app_url(&self) -> String {
        self.source.url(APP_DATABASE)
    }

    /// The URL tests get: the maintenance database, from which each test creates and
    /// drops its own database.
    pub fn maintenance_url(&self) -> String {
        self.source.url(MAINTENANCE_DATABASE)
    }

    /// Tells the watchdog which long-running child to wait for (and to send SIGTERM to)
    /// before stopping the cluster if xtask itself is killed while the child runs.
    pub fn watch_child(&mut self, pid: u32) {
        if let Some(guard) = &mut self.guard {
            guard.send(&format!("watch {pid}"));
        }
    }

    /// Tells the watchdog that this process is about to `exec` into a long-running
    /// program: the pipe will close at once, and the cluster must be stopped only when
    /// the program (same pid) exits, however long that takes.
    pub fn hand_over_to_exec(&mut self) {
        if let Some(guard) = &mut self.guard {
            guard.send(&format!("follow {}", std::process::id()));
        }
    }

    pub fn child_finished(&mut self) {
        if let Some(guard) = &mut self.guard {
            guard.send("unwatch");
        }
    }

    /// Stops the private cluster if xtask started it, reporting failure to stop.
    pub fn finish(mut self) -> Result<()> {
        match self.guard.take() {
            Some(mut guard) => guard.stop(),
            None => Ok(()),
        }
    }
}

/// `db url`: the URL discovery would give `up`, without starting anything.
pub fn discovered_app_url() -> (String, String) {
    let source = Source::discover(Purpose::Development);
    let description = match &source {
        Source::Environment(_) => "DATABASE_URL from the environment".to_owned(),
        Source::SystemServer => "the server on 127.0.0.1:5432".to_owned(),
        Source::PrivateCluster { reason, .. } => {
            let state = if accepts_tcp(PRIVATE_CLUSTER_PORT) {
                "running"
            } else {
                "not running; `cargo xtask db start` starts it"
            };
            format!("the private cluster ({reason}; {state})")
        }
    };
    (source.url(APP_DATABASE), description)
}

// ---------------------------------------------------------------------------------------
// The private cluster

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum InstallIfMissing {
    Yes,
    No,
}

/// The cluster under `target/`: data in `target/pgdata`, its log in
/// `target/pgdata.log`, its unix socket in `target/pgsocket` (not `/var/run/postgresql`,
/// which may not exist or belong to the system server).
///
/// As root the server runs as `postgres`, which must be able to enter every directory
/// above its data. A checkout under a private directory (`/root/…`, mode 0700) does not
/// allow that, so there the cluster lives in `/var/tmp/mailroom-pg-<hash of the checkout's
/// path>/` instead, one per checkout, kept across runs like `target/pgdata`.
pub struct PrivateCluster {
    target_dir: PathBuf,
    pub data_dir: PathBuf,
    socket_dir: PathBuf,
    log_file: PathBuf,
    pub port: u16,
    /// Server options beyond port, socket and listen address (`-c name=value …`).
    options: String,
    /// Libraries to preload before pg_stat_statements (`citus` must come first).
    preload: Vec<&'static str>,
}

impl PrivateCluster {
    /// The development and test cluster: `target/pgdata` on 55432, durability off.
    pub fn new() -> Self {
        // fsync and friends are off: this is a throwaway development and test cluster
        // under target/, and per-test CREATE DATABASE is much faster without them.
        Self::at(
            "pgdata",
            PRIVATE_CLUSTER_PORT,
            UNSAFE_FAST_OPTIONS,
            Vec::new(),
        )
    }

    /// The benchmarks' cluster: `target/pgdata-durable` on 55433, with PostgreSQL's
    /// default (production) durability. A separate cluster rather than the test
    /// cluster made durable: the tests keep their speed, and a benchmark can never
    /// measure a cluster that a test run started with durability off.
    pub fn durable() -> Self {
        Self::at("pgdata-durable", DURABLE_CLUSTER_PORT, "", Vec::new())
    }

    /// Whether the server options turn durability off.
    fn is_unsafe_fast(&self) -> bool {
        self.options.contains("fsync=off")
    }

    /// The durability settings in words, for the line saying which cluster is used.
    fn durability(&self) -> &'static str {
        if self.is_unsafe_fast() {
            "NOT DURABLE (fsync, synchronous_commit and full_page_writes off)"
        } else {
            "durable (fsync, synchronous_commit and full_page_writes on)"
        }
    }

    /// A cluster in `<private dir>/<name>` (data) and `<name>.log`, listening on `port`.
    pub fn at(name: &str, port: u16, options: &str, preload: Vec<&'static str>) -> Self {
        let target_dir = private_dir();
        PrivateCluster {
            data_dir: target_dir.join(name),
            socket_dir: target_dir.join("pgsocket"),
            log_file: target_dir.join(format!("{name}.log")),
            target_dir,
            port,
            options: options.to_owned(),
            preload,
        }
    }

    pub fn url(&self, database: &str) -> String {
        local_url(self.port, database)
    }

    /// The PostgreSQL server binaries to run this cluster with: the version that
    /// created the data directory if it exists, else the newest installed.
    pub fn binaries(&self, install: InstallIfMissing) -> Result<Binaries> {
        let wanted_major = fs::read_to_string(self.data_dir.join("PG_VERSION"))
            .ok()
            .and_then(|version| version.trim().parse::<u32>().ok());
        let mut candidates = server_binary_dirs();
        if candidates.is_empty() && install == InstallIfMissing::Yes {
            if !system::is_root() {
                return Err(
                    "no PostgreSQL server binaries (initdb) found: install the PostgreSQL \
                     server package (e.g. `sudo apt-get install postgresql`), start a server \
                     on 127.0.0.1:5432 or set DATABASE_URL"
                        .to_owned(),
                );
            }
            note("no initdb found; installing PostgreSQL with apt-get");
            system::apt_install(&["postgresql"])?;
            candidates = server_binary_dirs();
        }
        if candidates.is_empty() {
            return Err("no PostgreSQL server binaries (initdb, pg_ctl) found".to_owned());
        }
        let chosen = match wanted_major {
            None => candidates.swap_remove(0),
            Some(major) => match candidates.iter().position(|dir| dir.major == Some(major)) {
                Some(index) => candidates.swap_remove(index),
                None => {
                    return Err(format!(
                        "{} was created by PostgreSQL {major}, whose binaries are not installed \
                         (found {}); delete that directory to recreate the cluster",
                        self.data_dir.display(),
                        candidates[0].dir.display()
                    ))
                }
            },
        };
        Ok(Binaries::from_dir(chosen.dir))
    }

    pub fn is_running(&self, binaries: &Binaries) -> bool {
        self.data_dir.join("PG_VERSION").exists()
            && binaries
                .command("pg_ctl", &self.target_dir)
                .arg("status")
                .arg("-D")
                .arg(&self.data_dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success())
    }

    /// Creates the cluster if needed and starts it; waits until it accepts connections.
    pub fn start(&self, binaries: &Binaries) -> Result<()> {
        if !self.data_dir.join("PG_VERSION").exists() {
            self.initialise(binaries)?;
        }
        if accepts_tcp(self.port) {
            return Err(format!(
                "port {} is taken by another process, so the private cluster in {} cannot \
                 start",
                self.port,
                self.data_dir.display()
            ));
        }
        if let Some(parent) = self.log_file.parent() {
            fs::create_dir_all(parent)
                .map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
        }
        fs::create_dir_all(&self.socket_dir)
            .map_err(|error| format!("cannot create {}: {error}", self.socket_dir.display()))?;
        if !self.log_file.exists() {
            fs::write(&self.log_file, "")
                .map_err(|error| format!("cannot create {}: {error}", self.log_file.display()))?;
        }
        if binaries.run_as_postgres {
            // The server runs as `postgres` and must write its socket and its log.
            chown_to_postgres(&self.socket_dir)?;
            chown_to_postgres(&self.log_file)?;
        }
        // Unix socket paths are limited to about 100 bytes; in a deeply nested checkout
        // go without the socket (an empty -k), since every URL here uses TCP anyway.
        let socket_path = self.socket_dir.join(format!(".s.PGSQL.{}", self.port));
        let socket_dir = if socket_path.as_os_str().len() < 100 {
            self.socket_dir.to_string_lossy().into_owned()
        } else {
            String::new()
        };
        // pg_stat_statements is preloaded when installed, so `cargo xtask bench delivery`
        // can report PostgreSQL time per statement (it loads only at server start).
        let mut preload = self.preload.clone();
        if binaries.has_library("pg_stat_statements") {
            preload.push("pg_stat_statements");
        }
        let preload = if preload.is_empty() {
            String::new()
        } else {
            format!(" -c shared_preload_libraries={}", preload.join(","))
        };
        let server_options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 {}{preload}",
            self.port,
            system::shell_quote(&socket_dir),
            self.options
        );
        let started = system::run(
            binaries
                .command("pg_ctl", &self.target_dir)
                .arg("start")
                .arg("-D")
                .arg(&self.data_dir)
                .arg("-l")
                .arg(&self.log_file)
                .args(["-w", "-t", "120", "-o", &server_options]),
        );
        started.map_err(|error| format!("{error}\n{}", self.log_tail()))
    }

    pub fn stop(&self, binaries: &Binaries) -> Result<()> {
        // `fast` disconnects clients instead of waiting for them: a leftover test
        // connection must not keep the cluster alive.
        system::run(
            binaries
                .command("pg_ctl", &self.target_dir)
                .arg("stop")
                .arg("-D")
                .arg(&self.data_dir)
                .args(["-m", "fast", "-w"]),
        )
    }

    fn initialise(&self, binaries: &Binaries) -> Result<()> {
        if self.data_dir.exists() {
            // No PG_VERSION: the remains of an interrupted initdb, which would refuse a
            // non-empty directory.
            fs::remove_dir_all(&self.data_dir)
                .map_err(|error| format!("cannot remove {}: {error}", self.data_dir.display()))?;
        }
        fs::create_dir_all(&self.data_dir)
            .map_err(|error| format!("cannot create {}: {error}", self.data_dir.display()))?;
        if binaries.run_as_postgres {
            // initdb refuses to run as root, so it runs as `postgres`, which must own
            // the data directory.
            if !system::user_exists(SUPERUSER) {
                return Err(format!(
                    "running as root, initdb must run as the `{SUPERUSER}` system user, \
                     which does not exist (installing the `postgresql` package creates it)"
                ));
            }
            chown_to_postgres(&self.data_dir)?;
        }
        note(&format!(
            "creating the private cluster in {}",
            self.data_dir.display()
        ));
        // C.UTF-8 is built into glibc, so it exists whatever locales the machine has
        // generated; it orders by code point like C, but lower()/upper() know non-ASCII
        // letters, which case-insensitive search relies on (plain C lowers ASCII only).
        let mut initdb = binaries.command("initdb", &self.target_dir);
        initdb
            .arg("-D")
            .arg(&self.data_dir)
            .args(["-U", SUPERUSER, "--auth=trust", "-E", "UTF8"])
            .arg("--locale=C.UTF-8");
        // --no-sync: a throwaway cluster that runs with fsync off anyway.
        if self.is_unsafe_fast() {
            initdb.arg("--no-sync");
        }
        system::run(&mut initdb).map_err(|error| {
            format!(
                "{error}\n(as root, the `{SUPERUSER}` user must be able to enter every \
                 directory above {})",
                self.data_dir.display()
            )
        })
    }

    /// The end of the server log, to put in an error message when start-up fails.
    fn log_tail(&self) -> String {
        let log = fs::read_to_string(&self.log_file).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(15)..].join("\n");
        format!("last lines of {}:\n{tail}", self.log_file.display())
    }
}

/// Where private clusters live: `target/`, or as root in a checkout the `postgres` user
/// cannot enter, `/var/tmp/mailroom-pg-<hash of the checkout's path>/`.
pub fn private_dir() -> PathBuf {
    let workspace = system::workspace_root();
    let target_dir = workspace.join("target");
    if system::is_root() && !others_can_enter(&target_dir) {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        workspace.hash(&mut hasher);
        PathBuf::from(format!("/var/tmp/mailroom-pg-{:016x}", hasher.finish()))
    } else {
        target_dir
    }
}

/// Whether a user who is neither the owner nor in the group (as `postgres` is for
/// root's directories) may enter `dir` and every directory above it. Parts that do not
/// exist yet (`target/` before the first build) are created by root with mode 0755.
fn others_can_enter(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    dir.ancestors()
        .all(|ancestor| match fs::metadata(ancestor) {
            Ok(meta) => meta.permissions().mode() & 0o001 != 0,
            Err(_) => true,
        })
}

fn chown_to_postgres(path: &Path) -> Result<()> {
    let status = Command::new("chown")
        .arg("-R")
        .arg(format!("{SUPERUSER}:"))
        .arg(path)
        .status()
        .map_err(|error| format!("could not run chown: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "`chown -R {SUPERUSER}: {}` failed ({status})",
            path.display()
        ))
    }
}

/// A directory of PostgreSQL server binaries (initdb, pg_ctl, postgres, psql).
pub struct Binaries {
    pub dir: PathBuf,
    /// PostgreSQL refuses to run as root; when we are root, run it as `postgres`.
    run_as_postgres: bool,
}

impl Binaries {
    fn from_dir(dir: PathBuf) -> Self {
        Binaries {
            dir,
            run_as_postgres: system::is_root(),
        }
    }

    /// Whether the installation has the loadable module `name` (`../lib/<name>.so`
    /// beside `bin/`, Debian's and the source build's layout).
    pub fn has_library(&self, name: &str) -> bool {
        self.dir
            .parent()
            .is_some_and(|root| root.join("lib").join(format!("{name}.so")).exists())
    }

    /// A command running `tool` from this directory, as `postgres` when we are root.
    /// `working_dir` must be enterable by `postgres`, which root's may not be.
    pub fn command(&self, tool: &str, working_dir: &Path) -> Command {
        let program = self.dir.join(tool);
        let mut command = if self.run_as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", SUPERUSER, "--"]).arg(program);
            command
        } else {
            Command::new(program)
        };
        command.current_dir(working_dir);
        command
    }
}

struct BinaryDir {
    dir: PathBuf,
    major: Option<u32>,
}

/// Directories holding `initdb` and `pg_ctl`, best first: the one `initdb` in PATH
/// belongs to, then Debian's `/usr/lib/postgresql/<version>/bin`, newest first.
fn server_binary_dirs() -> Vec<BinaryDir> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(initdb) = system::find_in_path("initdb") {
        // Resolve symlinks (e.g. /usr/local/bin/initdb) so pg_ctl comes from the
        // same installation as initdb.
        let real = fs::canonicalize(&initdb).unwrap_or(initdb);
        if let Some(dir) = real.parent() {
            dirs.push(dir.to_path_buf());
        }
    }
    let mut versioned: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    versioned.sort_by_key(|(version, _)| std::cmp::Reverse(*version));
    dirs.extend(versioned.into_iter().map(|(_, dir)| dir));

    let mut unique: Vec<BinaryDir> = Vec::new();
    for dir in dirs {
        let usable = system::is_executable(&dir.join("initdb"))
            && system::is_executable(&dir.join("pg_ctl"));
        if usable && !unique.iter().any(|known| known.dir == dir) {
            let major = major_version(&dir.join("initdb"));
            unique.push(BinaryDir { dir, major });
        }
    }
    unique
}

/// `initdb (PostgreSQL) 15.8 (Debian 15.8-0+deb12u1)` → 15.
fn major_version(initdb: &Path) -> Option<u32> {
    let output = Command::new(initdb).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text.split_whitespace().nth(2)?;
    version.split('.').next()?.parse().ok()
}

/// `psql` from PATH, else from a server installation.
pub fn find_psql() -> Option<PathBuf> {
    system::find_in_path("psql").or_else(|| {
        server_binary_dirs()
            .into_iter()
            .map(|binaries| binaries.dir.join("psql"))
            .find(|psql| system::is_executable(psql))
    })
}

/// `db psql`: a psql command connected to the private cluster as `postgres`.
pub fn private_cluster_psql() -> Result<Command> {
    if !accepts_tcp(PRIVATE_CLUSTER_PORT) {
        return Err(format!(
            "the private cluster is not running on 127.0.0.1:{PRIVATE_CLUSTER_PORT}; \
             start it with `cargo xtask db start`"
        ));
    }
    let psql = find_psql().ok_or("psql not found; install postgresql-client")?;
    let mut command = Command::new(psql);
    command
        .args(["-h", "127.0.0.1", "-p"])
        .arg(PRIVATE_CLUSTER_PORT.to_string())
        .args(["-U", SUPERUSER]);
    Ok(command)
}

// ---------------------------------------------------------------------------------------
// The watchdog

/// A watchdog process that stops the private cluster once xtask is gone.
///
/// It runs `cargo xtask __pg-guard` in its own process group, so Ctrl-C in the terminal
/// does not reach it, and reads commands from a pipe (whose write end is close-on-exec,
/// so only xtask holds it):
/// - `stop`: xtask is done; stop the cluster quietly (xtask reports).
/// - `watch <pid>`: a child is running. If the pipe then closes without `stop`, xtask
///   was killed: wait for the child (which got the same Ctrl-C) to exit, send it SIGTERM
///   if it outlives a grace period (xtask was killed alone, so forward the signal), then
///   stop the cluster.
/// - `follow <pid>`: xtask is about to exec into the server under its own pid (`up`), so
///   Ctrl-C and SIGTERM reach the server directly. On EOF wait for that pid to exit,
///   however long, then stop the cluster.
/// - `unwatch`: the child has been waited for.
pub struct ClusterGuard {
    process: Child,
    control: Option<ChildStdin>,
}

impl ClusterGuard {
    pub fn spawn(binaries: &Binaries, cluster: &PrivateCluster) -> Result<Self> {
        let xtask = env::current_exe()
            .map_err(|error| format!("cannot find xtask's own executable: {error}"))?;
        let mut process = Command::new(xtask)
            .arg(GUARD_COMMAND)
            .arg(&binaries.dir)
            .arg(&cluster.data_dir)
            .stdin(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|error| format!("cannot start the cluster watchdog: {error}"))?;
        let control = process.stdin.take();
        Ok(ClusterGuard { process, control })
    }

    fn send(&mut self, line: &str) {
        if let Some(control) = &mut self.control {
            if writeln!(control, "{line}").is_err() {
                note("warning: the cluster watchdog has exited early");
            }
        }
    }

    pub fn stop(&mut self) -> Result<()> {
        if self.control.is_none() {
            return Ok(());
        }
        note("stopping the private PostgreSQL cluster");
        self.send("stop");
        drop(self.control.take());
        let status = self
            .process
            .wait()
            .map_err(|error| format!("cannot wait for the cluster watchdog: {error}"))?;
        if status.success() {
            Ok(())
        } else {
            Err("stopping the private PostgreSQL cluster failed".to_owned())
        }
    }
}

impl Drop for ClusterGuard {
    // Error paths (`?`) and panics unwind through here: stop the cluster then too.
    fn drop(&mut self) {
        if let Err(error) = self.stop() {
            note(&format!("error: {error}"));
        }
    }
}

/// The watchdog's main: `__pg-guard <binaries dir> <data dir>`.
pub fn run_guard(args: &[String]) -> Result<()> {
    let [binaries_dir, data_dir] = args else {
        return Err(format!("usage: {GUARD_COMMAND} <binaries dir> <data dir>"));
    };
    let binaries = Binaries::from_dir(PathBuf::from(binaries_dir));
    let data_dir = PathBuf::from(data_dir);

    let mut watched: Option<u32> = None;
    let mut followed: Option<u32> = None;
    let mut orderly = false;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let mut words = line.split_whitespace();
        match (words.next(), words.next()) {
            (Some("watch"), Some(pid)) => watched = pid.parse().ok(),
            (Some("follow"), Some(pid)) => followed = pid.parse().ok(),
            (Some("unwatch"), None) => watched = None,
            (Some("stop"), None) => {
                orderly = true;
                break;
            }
            _ => {}
        }
    }

    if let (false, Some(pid)) = (orderly, followed) {
        while is_alive(pid) {
            thread::sleep(Duration::from_millis(200));
        }
        note("the server has exited; stopping the private PostgreSQL cluster");
    } else if !orderly {
        note("interrupted; stopping the private PostgreSQL cluster xtask started");
        if let Some(pid) = watched {
            if !wait_for_exit(pid, Duration::from_secs(10)) {
                let _ = Command::new("kill")
                    .args(["-TERM", &pid.to_string()])
                    .status();
                wait_for_exit(pid, Duration::from_secs(30));
            }
        }
    }

    let working_dir = data_dir.parent().unwrap_or(Path::new("/"));
    let running = binaries
        .command("pg_ctl", working_dir)
        .arg("status")
        .arg("-D")
        .arg(&data_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !running {
        return Ok(());
    }
    let status = binaries
        .command("pg_ctl", working_dir)
        .arg("stop")
        .arg("-D")
        .arg(&data_dir)
        .args(["-m", "fast", "-w", "-s"])
        .status()
        .map_err(|error| format!("could not run pg_ctl: {error}"))?;
    if status.success() {
        if !orderly {
            note("the private PostgreSQL cluster is stopped");
        }
        Ok(())
    } else {
        Err(format!("pg_ctl stop failed ({status})"))
    }
}

/// Waits until process `pid` has exited (or is a zombie nobody reaped yet); returns
/// whether it did within `timeout`.
fn wait_for_exit(pid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if !is_alive(pid) {
            return true;
        }
        thread::sleep(Duration::from_millis(200));
    }
    !is_alive(pid)
}

fn is_alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the parenthesised command name, which may contain
        // spaces and parentheses itself.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) if Path::new("/proc/self/stat").exists() => false,
        // No procfs: ask kill(1), which cannot tell zombies apart.
        Err(_) => Command::new("kill")
            .args(["-0", &pid.to_string()])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success()),
    }
}

// ---------------------------------------------------------------------------------------
// Housekeeping shared by `up`, `test` and `ci`

/// Makes sure libpq can be linked: diesel's `postgres` feature links it through pq-sys,
/// and a missing library shows up only as a confusing linker error minutes into a build.
pub fn ensure_libpq() -> Result<()> {
    let pg_config = system::find_in_path("pg_config");
    let header_found = Path::new("/usr/include/postgresql/libpq-fe.h").exists()
        || pg_config.as_ref().is_some_and(|pg_config| {
            Command::new(pg_config)
                .arg("--includedir")
                .output()
                .is_ok_and(|output| {
                    let dir = String::from_utf8_lossy(&output.stdout).trim().to_owned();
                    !dir.is_empty() && Path::new(&dir).join("libpq-fe.h").exists()
                })
        });
    if pg_config.is_some() && header_found {
        return Ok(());
    }
    if !system::is_root() {
        note(
            "warning: libpq development files not found (pg_config, libpq-fe.h); the build \
             will likely fail to link. Install them, e.g. `sudo apt-get install libpq-dev \
             pkg-config`",
        );
        return Ok(());
    }
    note("libpq development files not found; installing libpq-dev with apt-get");
    system::apt_install(&["libpq-dev", "pkg-config"])
}

/// Drops databases named `mailroom_test_*` left by earlier test runs that crashed
/// before cleaning up. Databases with open connections are skipped: they may belong to
/// a test run happening right now. Without psql this is skipped, as it is only tidying.
pub fn drop_leftover_test_databases(url: &str) {
    let Some(psql) = find_psql() else {
        note("psql not found; not looking for leftover test databases");
        return;
    };
    let list = Command::new(&psql)
        .args([
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            url,
            "-c",
        ])
        .arg(
            r"SELECT datname, datistemplate FROM pg_database AS d
              WHERE datname LIKE 'mailroom\_test\_%'
                AND NOT EXISTS (SELECT 1 FROM pg_stat_activity AS a WHERE a.datid = d.oid)
              ORDER BY datname",
        )
        .output();
    let names = match list {
        Ok(output) if output.status.success() => String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| line.trim().split_once('|'))
            .map(|(name, template)| (name.to_owned(), template == "t"))
            .collect::<Vec<_>>(),
        Ok(output) => {
            note(&format!(
                "warning: could not list leftover test databases: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
            return;
        }
        Err(error) => {
            note(&format!("warning: could not run psql: {error}"));
            return;
        }
    };
    let mut dropped = 0;
    for (name, is_template) in &names {
        let quoted = format!("\"{}\"", name.replace('"', "\"\""));
        // Separate -c options run as separate transactions, which DROP DATABASE needs.
        // A template database cannot be dropped until it stops being one; the ALTER is
        // only for those, since it fails on a database an interrupted DROP left invalid
        // (which DROP alone removes).
        let mut drop = Command::new(&psql);
        drop.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url]);
        if *is_template {
            drop.arg("-c")
                .arg(format!("ALTER DATABASE {quoted} IS_TEMPLATE false"));
        }
        let result = drop
            .arg("-c")
            .arg(format!("DROP DATABASE IF EXISTS {quoted}"))
            .output();
        match result {
            Ok(output) if output.status.success() => dropped += 1,
            Ok(output) => note(&format!(
                "warning: could not drop leftover test database {name}: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )),
            Err(error) => note(&format!("warning: could not run psql: {error}")),
        }
    }
    if dropped > 0 {
        note(&format!(
            "dropped {dropped} leftover test database(s) from earlier runs"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A throwaway cluster whose `postgres` role needs a password (scram-sha-256) and
    /// whose `probe_admin` superuser is trusted, on a free port under /tmp; stopped and
    /// deleted on drop.
    struct PasswordCluster {
        root: PathBuf,
        data_dir: PathBuf,
        binaries: Binaries,
        port: u16,
    }

    impl PasswordCluster {
        fn start() -> Option<Self> {
            let Some(found) = server_binary_dirs().into_iter().next() else {
                eprintln!("skipped: no PostgreSQL server binaries (initdb, pg_ctl) here");
                return None;
            };
            let binaries = Binaries::from_dir(found.dir);
            // Under /tmp: as root, `postgres` must be able to enter every parent.
            let root = env::temp_dir().join(format!("xtask-probe-{}", std::process::id()));
            let _ = fs::remove_dir_all(&root);
            let data_dir = root.join("data");
            fs::create_dir_all(&data_dir).expect("creating the data directory");
            let password_file = root.join("password");
            fs::write(&password_file, "not-trusted\n").expect("writing the password file");
            if binaries.run_as_postgres {
                chown_to_postgres(&root).expect("chown to postgres");
            }
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|listener| listener.local_addr())
                .expect("a free port")
                .port();
            let cluster = PasswordCluster {
                root,
                data_dir,
                binaries,
                port,
            };
            let initdb = cluster
                .binaries
                .command("initdb", &cluster.root)
                .arg("-D")
                .arg(&cluster.data_dir)
                .args(["-U", "probe_admin", "--auth=scram-sha-256", "-E", "UTF8"])
                .arg(format!("--pwfile={}", password_file.display()))
                .args(["--locale=C.UTF-8", "--no-sync"])
                .output()
                .expect("running initdb");
            assert!(
                initdb.status.success(),
                "initdb failed: {}",
                String::from_utf8_lossy(&initdb.stderr)
            );
            // The stock Debian rule for `postgres` over TCP (a password), and a trusted
            // superuser so the same server shows what "trusted" looks like.
            fs::write(
                cluster.data_dir.join("pg_hba.conf"),
                "host all postgres 127.0.0.1/32 scram-sha-256\n\
                 host all probe_admin 127.0.0.1/32 trust\n\
                 host all all 127.0.0.1/32 trust\n",
            )
            .expect("writing pg_hba.conf");
            let options = format!(
                "-p {port} -k '' -c listen_addresses=127.0.0.1 -c fsync=off",
                port = cluster.port
            );
            let started = cluster
                .binaries
                .command("pg_ctl", &cluster.root)
                .arg("start")
                .arg("-D")
                .arg(&cluster.data_dir)
                .arg("-l")
                .arg(cluster.root.join("log"))
                .args(["-w", "-t", "60", "-o", &options])
                .stdout(Stdio::null())
                .status()
                .expect("running pg_ctl start");
            assert!(started.success(), "pg_ctl start failed ({started})");
            Some(cluster)
        }

        fn probe(&self, user: &str) -> Probe {
            probe_trust(
                SocketAddr::from(([127, 0, 0, 1], self.port)),
                user,
                MAINTENANCE_DATABASE,
            )
        }
    }

    impl Drop for PasswordCluster {
        fn drop(&mut self) {
            let _ = self
                .binaries
                .command("pg_ctl", &self.root)
                .arg("stop")
                .arg("-D")
                .arg(&self.data_dir)
                .args(["-m", "immediate", "-w"])
                .stdout(Stdio::null())
                .status();
            let _ = fs::remove_dir_all(&self.root);
        }
    }

    #[test]
    fn a_server_that_wants_a_password_or_lacks_the_role_is_refused_for_auth() {
        let Some(cluster) = PasswordCluster::start() else {
            return;
        };
        assert_eq!(cluster.probe("probe_admin"), Probe::Trusted);

        let password = cluster.probe(SUPERUSER);
        assert_eq!(
            password,
            Probe::RefusedForAuth("it asks for a password (scram-sha-256)".to_owned())
        );
        let Source::PrivateCluster { reason, .. } =
            Source::from_probe(password, PRIVATE_CLUSTER_PORT)
        else {
            panic!("a server that wants a password must not be used as trusted");
        };
        assert!(reason.contains("refuses the `postgres` role"), "{reason}");

        let Probe::RefusedForAuth(missing_role) = cluster.probe("no_such_role") else {
            panic!("a missing role must be refused for authentication");
        };
        assert!(missing_role.contains("does not exist"), "{missing_role}");
    }

    #[test]
    fn a_private_directory_above_the_data_is_noticed() {
        use std::os::unix::fs::PermissionsExt;
        let root = env::temp_dir().join(format!("xtask-enter-{}", std::process::id()));
        let inner = root.join("checkout/target");
        fs::create_dir_all(&inner).expect("creating directories");
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).expect("chmod");
        let open = others_can_enter(&inner) && others_can_enter(&inner.join("not-yet"));
        fs::set_permissions(root.join("checkout"), fs::Permissions::from_mode(0o700))
            .expect("chmod");
        let closed = others_can_enter(&inner);
        let _ = fs::remove_dir_all(&root);
        assert!(open, "every directory above is 0755");
        assert!(
            !closed,
            "a 0700 directory above the data keeps `postgres` out"
        );
    }

    #[test]
    fn benchmarks_fall_back_to_a_durable_cluster_of_their_own() {
        let tests = Purpose::Development.private_cluster();
        let bench = Purpose::DurableBenchmark.private_cluster();
        assert!(tests.is_unsafe_fast(), "the test cluster keeps its speed");
        assert!(!bench.is_unsafe_fast(), "{}", bench.options);
        assert!(!bench.options.contains("=off"), "{}", bench.options);
        // Never the test cluster, which a test run may have started without durability.
        assert_ne!(bench.port, tests.port);
        assert_ne!(bench.data_dir, tests.data_dir);
        let fast = Purpose::UnsafeFastBenchmark.private_cluster();
        assert_eq!((fast.port, &fast.data_dir), (tests.port, &tests.data_dir));
        assert!(bench.durability().starts_with("durable"));
        assert!(tests.durability().starts_with("NOT DURABLE"));
    }

    #[test]
    fn discovery_maps_each_probe_outcome() {
        assert!(matches!(
            Source::from_probe(Probe::Trusted, PRIVATE_CLUSTER_PORT),
            Source::SystemServer
        ));
        assert!(matches!(
            Source::from_probe(Probe::NotListening, PRIVATE_CLUSTER_PORT),
            Source::PrivateCluster { .. }
        ));
        assert!(matches!(
            Source::from_probe(Probe::NotPostgres("HTTP".into()), PRIVATE_CLUSTER_PORT),
            Source::PrivateCluster { .. }
        ));
        assert!(matches!(
            Source::from_probe(
                Probe::OtherError("too many clients".into()),
                PRIVATE_CLUSTER_PORT
            ),
            Source::SystemServer
        ));
    }

    #[test]
    fn something_that_is_not_postgres_is_told_apart() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a listener");
        let address = listener.local_addr().expect("its address");
        let server = thread::spawn(move || {
            use std::io::Read;
            let (mut stream, _) = listener.accept().expect("a connection");
            let mut request = [0_u8; 64];
            let _ = stream.read(&mut request);
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        });
        let probe = probe_trust(address, SUPERUSER, MAINTENANCE_DATABASE);
        server.join().expect("the fake server");
        assert!(matches!(probe, Probe::NotPostgres(_)), "{probe:?}");
    }
}
