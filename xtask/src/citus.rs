//! `cargo xtask citus up|down|psql|url`, and the cluster `cargo xtask test --citus` runs on.
//!
//! A Citus cluster on loopback, in the private directory beside the plain private cluster
//! (`target/citus/`, or `/var/tmp/mailroom-pg-…/citus/` as root in a checkout `postgres`
//! cannot enter): a coordinator and two workers, plus one spare node that belongs to no
//! database until a test adds it (the rebalancing tests). Each node is a PostgreSQL
//! cluster of its own, started with the machine's server binaries and
//! `shared_preload_libraries = 'citus'`: durable for `citus up` and the benchmarks (fsync,
//! synchronous commit and full-page writes at their defaults, as an operator runs it),
//! without durability when `test --citus` starts it ([`Durability`]).
//!
//! Citus is found in the server's library directory (`citus.so`). Without it, and with
//! `MAILROOM_CITUS_SOURCE` naming a source tarball, it is built and installed into the
//! server's directories (root only; the build's `-dev` packages come from apt-get), with
//! the `.patch` files beside the tarball applied when the server's headers need them.
//! Operators install Citus from its own packages instead.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::postgres::{
    self, accepts_tcp, local_url, Binaries, ClusterGuard, InstallIfMissing, PrivateCluster,
};
use crate::system::{self, note};
use crate::Result;

/// The tarball to build Citus from when it is not installed.
pub const SOURCE_ENV: &str = "MAILROOM_CITUS_SOURCE";
/// Worker URLs for test-support (comma-separated maintenance URLs), set by `test --citus`.
pub const WORKERS_ENV: &str = "MAILROOM_CITUS_WORKERS";
/// The spare node's maintenance URL for test-support, set by `test --citus`.
pub const SPARE_ENV: &str = "MAILROOM_CITUS_SPARE";
/// Where `mailroom-bench` writes its headline figures (bench/src/comparison.rs).
pub const FIGURES_ENV: &str = "MAILROOM_BENCH_FIGURES";
/// The single server's figures, which the run on Citus prints beside its own.
pub const BASELINE_ENV: &str = "MAILROOM_BENCH_BASELINE";
/// The database `citus up` prepares for `mailroom serve`.
const APP_DATABASE: &str = "mailroom";

const COORDINATOR_PORT: u16 = 55440;
const WORKER_PORTS: [u16; 2] = [55441, 55442];
const SPARE_PORT: u16 = 55443;

/// What Citus needs besides PostgreSQL's defaults: prepared transactions for its
/// two-phase commits, logical decoding for online shard moves, room for the connections
/// every test process opens to every node, and background workers for the rebalancer.
const NODE_OPTIONS: &str = "-c max_connections=400 -c max_prepared_transactions=400 \
    -c wal_level=logical -c max_replication_slots=32 -c max_wal_senders=32 \
    -c max_worker_processes=48 -c citus.max_background_task_executors_per_node=2";

/// The four nodes: coordinator, the two workers, the spare.
pub struct CitusCluster {
    coordinator: PrivateCluster,
    workers: Vec<PrivateCluster>,
    spare: PrivateCluster,
}

/// How the nodes a run starts keep their word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// fsync, synchronous commit and full-page writes at their defaults, as an operator
    /// runs it: `citus up` and the benchmarks.
    Durable,
    /// All three off, for `test --citus`: every test creates a database on each of the
    /// four nodes, and with durability on the suite spends much of its time waiting on
    /// the disk. A node's fast shutdown and restart (the node-away test) stays safe;
    /// only a crash of the machine could lose data, and it is a throwaway cluster.
    UnsafeFast,
}

impl CitusCluster {
    /// The cluster as `citus up` and the benchmarks run it: durable.
    pub fn new() -> Self {
        Self::with(Durability::Durable)
    }

    /// The cluster with its nodes started as `durability` says (a running cluster keeps
    /// the settings it was started with).
    pub fn with(durability: Durability) -> Self {
        let options = match durability {
            Durability::Durable => NODE_OPTIONS.to_owned(),
            Durability::UnsafeFast => format!("{NODE_OPTIONS} {}", postgres::UNSAFE_FAST_OPTIONS),
        };
        let node = |name: &str, port| {
            PrivateCluster::at(&format!("citus/{name}"), port, &options, vec!["citus"])
        };
        CitusCluster {
            coordinator: node("coordinator", COORDINATOR_PORT),
            workers: WORKER_PORTS
                .iter()
                .enumerate()
                .map(|(index, port)| node(&format!("worker-{}", index + 1), *port))
                .collect(),
            spare: node("spare", SPARE_PORT),
        }
    }

    fn nodes(&self) -> impl Iterator<Item = &PrivateCluster> {
        std::iter::once(&self.coordinator)
            .chain(&self.workers)
            .chain(std::iter::once(&self.spare))
    }

    /// The coordinator's URL for `database`.
    pub fn url(&self, database: &str) -> String {
        self.coordinator.url(database)
    }

    /// The workers' maintenance URLs, comma-separated ([`WORKERS_ENV`]).
    pub fn worker_urls(&self) -> String {
        self.workers
            .iter()
            .map(|worker| worker.url("postgres"))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn spare_url(&self) -> String {
        self.spare.url("postgres")
    }

    /// Removes what earlier test runs left on every node: transactions a test left
    /// prepared (a prepared transaction holds back every shard move on its node), then
    /// the test databases (`mailroom_test_*`) that nobody is connected to.
    pub fn drop_leftover_test_databases(&self) {
        for node in self.nodes() {
            let url = node.url("postgres");
            let leftovers = psql_value(
                &url,
                r"SELECT string_agg(database || ' ' || gid, E'\n') FROM pg_prepared_xacts
                  WHERE database LIKE 'mailroom\_test\_%'",
            )
            .unwrap_or_default();
            for line in leftovers.lines() {
                if let Some((database, gid)) = line.split_once(' ') {
                    let _ = psql(
                        &node.url(database),
                        &format!("ROLLBACK PREPARED '{}'", gid.replace('\'', "''")),
                    );
                }
            }
            postgres::drop_leftover_test_databases(&url);
        }
    }

    /// Starts every node that is not running (creating it first if need be), with a
    /// watchdog each that stops it when xtask ends; returns the watchdogs (empty when
    /// all were running already, and are left running).
    pub fn start(&self, binaries: &Binaries, guarded: bool) -> Result<Vec<ClusterGuard>> {
        let mut guards = Vec::new();
        for node in self.nodes() {
            if node.is_running(binaries) {
                continue;
            }
            if guarded {
                guards.push(ClusterGuard::spawn(binaries, node)?);
            }
            node.start(binaries)?;
            allow_citus_decoder(&node.url("postgres"))?;
        }
        Ok(guards)
    }

    pub fn stop(&self, binaries: &Binaries) -> Result<()> {
        for node in self.nodes() {
            if node.is_running(binaries) {
                node.stop(binaries)?;
            }
        }
        Ok(())
    }

    /// Creates `database` on the coordinator and the workers (not the spare) with the
    /// extension, and registers the workers with the coordinator. Idempotent.
    pub fn prepare_database(&self, database: &str) -> Result<()> {
        for node in self
            .workers
            .iter()
            .chain(std::iter::once(&self.coordinator))
        {
            let exists = psql_value(
                &node.url("postgres"),
                &format!("SELECT count(*) FROM pg_database WHERE datname = '{database}'"),
            )?;
            if exists == "0" {
                psql(
                    &node.url("postgres"),
                    &format!("CREATE DATABASE \"{database}\""),
                )?;
            }
            psql(&node.url(database), "CREATE EXTENSION IF NOT EXISTS citus")?;
        }
        let mut statements = vec![format!(
            "SELECT citus_set_coordinator_host('127.0.0.1', {COORDINATOR_PORT})"
        )];
        for worker in &self.workers {
            statements.push(format!(
                "SELECT citus_add_node('127.0.0.1', {}) WHERE NOT EXISTS \
                 (SELECT 1 FROM pg_dist_node WHERE nodename = '127.0.0.1' AND nodeport = {})",
                worker.port, worker.port
            ));
        }
        psql(&self.url(database), &statements.join("; "))
    }
}

/// Lets Citus's own logical decoder (`citus`, which a tenant's isolation into a new shard
/// replicates through) run as an output plugin, on servers that restrict output plugins
/// to a list (`output_plugin_libraries`, in some PostgreSQL 15 builds; without that
/// setting there is nothing to do).
fn allow_citus_decoder(url: &str) -> Result<()> {
    let restricted = psql_value(
        url,
        "SELECT count(*) FROM pg_settings WHERE name = 'output_plugin_libraries'",
    )?;
    if restricted == "0" {
        return Ok(());
    }
    psql(
        url,
        "ALTER SYSTEM SET output_plugin_libraries = 'pgoutput', 'test_decoding', 'citus'",
    )?;
    psql(url, "SELECT pg_reload_conf()")
}

/// The server binaries, with Citus installed (built from [`SOURCE_ENV`] when missing).
pub fn binaries_with_citus(cluster: &CitusCluster) -> Result<Binaries> {
    let binaries = cluster.coordinator.binaries(InstallIfMissing::Yes)?;
    if binaries.has_library("citus") {
        note(&format!(
            "Citus: installed ({})",
            binaries
                .dir
                .with_file_name("lib")
                .join("citus.so")
                .display()
        ));
        return Ok(binaries);
    }
    let Some(source) = env::var_os(SOURCE_ENV).map(PathBuf::from) else {
        return Err(format!(
            "Citus is not installed for the PostgreSQL in {} (no citus.so in its library \
             directory). Install Citus from its own packages for this PostgreSQL version, \
             or set {SOURCE_ENV} to a Citus source tarball (a `git archive` of a release \
             tag) to build it here",
            binaries.dir.display()
        ));
    };
    // The build runs in its own directory, so a relative path is made absolute first.
    let source = fs::canonicalize(&source)
        .map_err(|error| format!("{SOURCE_ENV}={}: {error}", source.display()))?;
    build_and_install(&binaries, &source)?;
    if binaries.has_library("citus") {
        Ok(binaries)
    } else {
        Err(format!(
            "the Citus build from {} finished but no citus.so is in {}",
            source.display(),
            binaries.dir.with_file_name("lib").display()
        ))
    }
}

/// Unpacks the tarball under `target/citus-build`, applies the patches beside it when the
/// server's headers need them, then `./configure && make && make install`.
fn build_and_install(binaries: &Binaries, source: &Path) -> Result<()> {
    if !source.is_file() {
        return Err(format!("{SOURCE_ENV}={} is not a file", source.display()));
    }
    if !system::is_root() {
        return Err(format!(
            "building Citus from {} installs it into PostgreSQL's own directories, which \
             needs root; run as root, or install Citus from its packages",
            source.display()
        ));
    }
    let pg_config = binaries.dir.join("pg_config");
    // The server's own version: pg_config comes with the -dev package, not yet installed.
    let major = server_major(&binaries.dir.join("postgres")).ok_or_else(|| {
        format!(
            "cannot tell the version of {}",
            binaries.dir.join("postgres").display()
        )
    })?;
    note(&format!(
        "Citus: not installed; building it from {} for PostgreSQL {major} (a few minutes)",
        source.display()
    ));
    // What the build links against, besides the server's headers; measured on Debian 12.
    let server_dev = format!("postgresql-server-dev-{major}");
    system::apt_install(&[
        server_dev.as_str(),
        "make",
        "gcc",
        "libkrb5-dev",
        "liblz4-dev",
        "libzstd-dev",
        "libssl-dev",
        "libselinux1-dev",
        "libxslt1-dev",
        "libpam0g-dev",
        "libreadline-dev",
    ])?;
    let pg_config = if pg_config.exists() {
        pg_config
    } else {
        system::find_in_path("pg_config").ok_or("pg_config not found after installing it")?
    };

    let build_root = system::workspace_root().join("target/citus-build");
    if build_root.exists() {
        fs::remove_dir_all(&build_root)
            .map_err(|error| format!("cannot remove {}: {error}", build_root.display()))?;
    }
    fs::create_dir_all(&build_root)
        .map_err(|error| format!("cannot create {}: {error}", build_root.display()))?;
    system::run(
        Command::new("tar")
            .arg("xzf")
            .arg(source)
            .arg("-C")
            .arg(&build_root),
    )?;
    let tree = single_directory(&build_root)?;

    if server_exports_createdb_privilege(&pg_config) {
        for patch in patches_beside(source) {
            note(&format!(
                "Citus: this PostgreSQL exports have_createdb_privilege(); applying {}",
                patch.display()
            ));
            system::run(
                Command::new("patch")
                    .args(["-p1", "--forward", "-i"])
                    .arg(&patch)
                    .current_dir(&tree),
            )?;
        }
    }
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    let log = build_root.join("build.log");
    let steps: [&[&str]; 3] = [
        &["./configure", "--without-libcurl"],
        &["make", &format!("-j{jobs}")],
        &["make", "install"],
    ];
    for step in steps {
        build_step(step, &pg_config, &tree, &log)?;
    }
    note(&format!(
        "Citus: built and installed (log in {})",
        log.display()
    ));
    Ok(())
}

/// One step of the build, its output appended to `log` (thousands of lines); on failure
/// the error carries the log's last lines.
fn build_step(words: &[&str], pg_config: &Path, tree: &Path, log: &Path) -> Result<()> {
    let output = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|error| format!("cannot open {}: {error}", log.display()))?;
    let errors = output
        .try_clone()
        .map_err(|error| format!("cannot open {}: {error}", log.display()))?;
    let mut command = Command::new(words[0]);
    command
        .args(&words[1..])
        .env("PG_CONFIG", pg_config)
        .current_dir(tree)
        .stdout(output)
        .stderr(errors);
    let status = system::run_status(&mut command)?;
    if status.success() {
        return Ok(());
    }
    let text = fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    Err(format!(
        "`{}` failed ({status}); the end of {}:\n{}",
        words.join(" "),
        log.display(),
        lines[lines.len().saturating_sub(30)..].join("\n")
    ))
}

/// `postgres (PostgreSQL) 15.20 (Debian …)` → 15.
fn server_major(postgres: &Path) -> Option<u32> {
    let output = Command::new(postgres).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.split_whitespace()
        .nth(2)?
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// PostgreSQL 15.20 and later export `have_createdb_privilege()`, which Citus 13.2 also
/// defines for 15; the build then stops at the second definition.
fn server_exports_createdb_privilege(pg_config: &Path) -> bool {
    let Ok(output) = Command::new(pg_config).arg("--includedir-server").output() else {
        return false;
    };
    let dir = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    fs::read_to_string(Path::new(&dir).join("commands/dbcommands.h"))
        .is_ok_and(|header| header.contains("have_createdb_privilege"))
}

fn patches_beside(source: &Path) -> Vec<PathBuf> {
    let mut patches: Vec<PathBuf> = source
        .parent()
        .and_then(|dir| fs::read_dir(dir).ok())
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "patch"))
        .collect();
    patches.sort();
    patches
}

fn single_directory(dir: &Path) -> Result<PathBuf> {
    let entries: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|error| format!("cannot read {}: {error}", dir.display()))?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .collect();
    match entries.as_slice() {
        [tree] => Ok(tree.clone()),
        _ => Err(format!(
            "the Citus tarball should unpack into one directory; {} holds {}",
            dir.display(),
            entries.len()
        )),
    }
}

fn psql_command(url: &str) -> Result<Command> {
    let psql = postgres::find_psql().ok_or("psql not found; install postgresql-client")?;
    let mut command = Command::new(psql);
    command.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url]);
    Ok(command)
}

fn psql(url: &str, sql: &str) -> Result<()> {
    let output = psql_command(url)?
        .arg("-c")
        .arg(sql)
        .output()
        .map_err(|error| format!("could not run psql: {error}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "psql on {url} failed: {}\n{sql}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

fn psql_value(url: &str, sql: &str) -> Result<String> {
    let output = psql_command(url)?
        .args(["-A", "-t", "-c"])
        .arg(sql)
        .output()
        .map_err(|error| format!("could not run psql: {error}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    } else {
        Err(format!(
            "psql on {url} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// A running cluster for `test --citus` or `bench … --citus`: started (and stopped when
/// dropped) unless it was running already.
pub struct RunningCluster {
    pub cluster: CitusCluster,
    guards: Vec<ClusterGuard>,
}

impl RunningCluster {
    pub fn provide(durability: Durability) -> Result<Self> {
        let cluster = CitusCluster::with(durability);
        let binaries = binaries_with_citus(&cluster)?;
        let guards = cluster.start(&binaries, true)?;
        note(&format!(
            "Citus: coordinator on 127.0.0.1:{COORDINATOR_PORT}, workers on {}, spare node \
             on {SPARE_PORT} ({})",
            WORKER_PORTS.map(|port| port.to_string()).join(" and "),
            if guards.is_empty() {
                "already running, left running"
            } else {
                "started now, stopped when xtask ends"
            }
        ));
        let running = RunningCluster { cluster, guards };
        // A cluster that was running already keeps the settings it was started with:
        // a benchmark refuses one that `test --citus` started without durability.
        if durability == Durability::Durable {
            let fsync = psql_value(&running.cluster.url("postgres"), "SHOW fsync")?;
            if fsync != "on" {
                return Err(format!(
                    "the running Citus cluster has fsync {fsync} (a test run started it \
                     without durability); stop it with `cargo xtask citus down` and run \
                     again"
                ));
            }
        }
        Ok(running)
    }

    pub fn finish(mut self) -> Result<()> {
        let mut outcome = Ok(());
        for mut guard in self.guards.drain(..) {
            if let Err(error) = guard.stop() {
                outcome = Err(error);
            }
        }
        outcome
    }
}

/// `cargo xtask citus up`: build or find Citus, start the nodes (left running), prepare
/// the `mailroom` database with the workers registered.
pub fn up() -> Result<()> {
    let cluster = CitusCluster::new();
    let binaries = binaries_with_citus(&cluster)?;
    cluster.start(&binaries, false)?;
    cluster.prepare_database(APP_DATABASE)?;
    note(&format!(
        "Citus cluster running: coordinator 127.0.0.1:{COORDINATOR_PORT}, workers {}, spare \
         node {SPARE_PORT} (not in the cluster), data under {}; DATABASE_URL={}",
        WORKER_PORTS.map(|port| port.to_string()).join(", "),
        postgres::private_dir().join("citus").display(),
        cluster.url(APP_DATABASE)
    ));
    Ok(())
}

/// `cargo xtask citus down`.
pub fn down() -> Result<()> {
    let cluster = CitusCluster::new();
    let binaries = cluster.coordinator.binaries(InstallIfMissing::No)?;
    cluster.stop(&binaries)?;
    note("Citus cluster stopped");
    Ok(())
}

/// `cargo xtask citus url`.
pub fn url() -> Result<()> {
    let state = if accepts_tcp(COORDINATOR_PORT) {
        "running"
    } else {
        "not running; `cargo xtask citus up` starts it"
    };
    note(&format!("Citus coordinator: {state}"));
    println!("{}", local_url(COORDINATOR_PORT, APP_DATABASE));
    Ok(())
}

/// `cargo xtask citus psql [args…]`: psql on the coordinator's `mailroom` database.
pub fn psql_exec(args: &[String]) -> Result<std::process::ExitCode> {
    use std::os::unix::process::CommandExt;
    if !accepts_tcp(COORDINATOR_PORT) {
        return Err("the Citus cluster is not running; `cargo xtask citus up` starts it".into());
    }
    let psql = postgres::find_psql().ok_or("psql not found; install postgresql-client")?;
    let error = Command::new(psql)
        .args(["-d", &local_url(COORDINATOR_PORT, APP_DATABASE)])
        .args(args)
        .exec();
    Err(format!("could not run psql: {error}"))
}
