//! `cargo xtask bench audience|webhooks|announcement|delivery|conversion|lanes [--unsafe-fast-db]
//! [--citus] [args…]`:
//! the benchmarks (`bench/`, package `mailroom-bench`) in release mode against the
//! PostgreSQL that discovery finds. The benchmark creates and drops a database of its own
//! there.
//!
//! Discovery is `test`'s (`DATABASE_URL`, then the server on 127.0.0.1:5432), except that
//! the private cluster it falls back to is a durable one (`target/pgdata-durable` on
//! 55433), not the test cluster that runs with fsync off. `mailroom-bench` reads the
//! durability settings from the server it measures and refuses a server without them.
//! `--unsafe-fast-db` opts out: the fast test cluster (unless `DATABASE_URL` is set),
//! and `mailroom-bench` marks every line it prints as measured without durability.
//!
//! `--citus` (delivery and audience) runs the benchmark twice: on that database, then on
//! the Citus cluster of `cargo xtask citus` (started if need be), whose run prints the
//! headline figures of both side by side (bench/src/comparison.rs). `conversion` and
//! `lanes` run on the Citus cluster only.
//!
//! `delivery` also needs Postfix's `smtp-sink` and `smtp-source`: they are unpacked from
//! Debian's postfix package into `target/postfix` (`apt-get download`, `dpkg -x`; the
//! package is never installed and no daemon starts), and `mailroom` is built in release
//! mode so the benchmark can run the real worker process.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::postgres::{self, Postgres, Purpose};
use crate::system::{self, note};
use crate::Result;

/// The benchmarks `mailroom-bench` knows.
const BENCHMARKS: [&str; 6] = [
    "audience",
    "webhooks",
    "announcement",
    "delivery",
    "conversion",
    "lanes",
];
/// The benchmarks measured on the Citus cluster only.
const CITUS_ONLY: [&str; 2] = ["conversion", "lanes"];
/// The benchmark compares the API with pgbench from the system's PostgreSQL tools.
const PGBENCH: &str = "/usr/bin/pgbench";
/// The opt-in to measure on a database without production durability; `mailroom-bench`
/// knows the same flag.
pub const UNSAFE_FAST_DB: &str = "--unsafe-fast-db";
/// Runs the benchmark on one server, then on the Citus cluster, and compares.
const CITUS: &str = "--citus";
/// The benchmarks `--citus` compares.
const CITUS_BENCHMARKS: [&str; 2] = ["delivery", "audience"];

/// Which database a benchmark's arguments ask for: [`Purpose::UnsafeFastBenchmark`] when
/// they hold [`UNSAFE_FAST_DB`] (which stays in them, for `mailroom-bench`), else the
/// durable one.
pub fn purpose(args: &[String]) -> Purpose {
    if args.iter().any(|arg| arg == UNSAFE_FAST_DB) {
        Purpose::UnsafeFastBenchmark
    } else {
        Purpose::DurableBenchmark
    }
}

pub fn run(args: &[String]) -> Result<()> {
    let Some((name, rest)) = args.split_first() else {
        return Err(format!(
            "`bench` needs a benchmark name: {}",
            BENCHMARKS.join(", ")
        ));
    };
    if !BENCHMARKS.contains(&name.as_str()) {
        return Err(format!(
            "unknown benchmark `{name}` (expected {})",
            BENCHMARKS.join(", ")
        ));
    }
    postgres::ensure_libpq()?;
    if !Path::new(PGBENCH).exists() {
        if !system::is_root() {
            return Err(format!(
                "{PGBENCH} not found: install the PostgreSQL client tools (e.g. `sudo apt-get install postgresql-client`)"
            ));
        }
        note("pgbench not found; installing postgresql-client with apt-get");
        system::apt_install(&["postgresql-client"])?;
    }
    // The webhook benchmark drives its receiver directly with wrk for the reference rate.
    if name == "webhooks" && !Path::new("/usr/bin/wrk").exists() && system::is_root() {
        note("wrk not found; installing it with apt-get");
        system::apt_install(&["wrk"])?;
    }
    let mut extra_env = Vec::new();
    if name == "delivery" {
        extra_env.push(("MAILROOM_BENCH_POSTFIX", unpack_postfix()?));
        system::run(Command::new("cargo").args([
            "build",
            "--release",
            "--package",
            "mailroom-server",
            "--bin",
            "mailroom",
        ]))?;
        // Where cargo put it: CARGO_TARGET_DIR when set (a shared or per-worktree target
        // directory), else the workspace's `target/`.
        let target_dir = std::env::var_os("CARGO_TARGET_DIR")
            .filter(|dir| !dir.is_empty())
            .map(PathBuf::from)
            .map(|dir| {
                if dir.is_absolute() {
                    dir
                } else {
                    system::workspace_root().join(dir)
                }
            })
            .unwrap_or_else(|| system::workspace_root().join("target"));
        extra_env.push(("MAILROOM_BENCH_BIN", target_dir.join("release/mailroom")));
    }
    let citus_only = CITUS_ONLY.contains(&name.as_str());
    let on_citus = citus_only || rest.iter().any(|arg| arg == CITUS);
    let rest: Vec<String> = rest.iter().filter(|arg| *arg != CITUS).cloned().collect();
    if on_citus && purpose(&rest) == Purpose::UnsafeFastBenchmark {
        return Err(format!(
            "{CITUS} compares durable servers: the Citus nodes run with fsync on, so \
             {UNSAFE_FAST_DB} would compare unlike databases"
        ));
    }
    if on_citus && !citus_only && !CITUS_BENCHMARKS.contains(&name.as_str()) {
        return Err(format!(
            "{CITUS} is measured for {} only",
            CITUS_BENCHMARKS.join(" and ")
        ));
    }
    let started = Instant::now();
    let figures = system::workspace_root().join("target/bench-figures");
    let single_figures = figures.join(format!("{name}-one-server.txt"));
    let citus_figures = figures.join(format!("{name}-citus.txt"));
    if on_citus {
        std::fs::create_dir_all(&figures)
            .map_err(|error| format!("creating {}: {error}", figures.display()))?;
        for file in [&single_figures, &citus_figures] {
            let _ = std::fs::remove_file(file);
        }
        extra_env.push((crate::citus::FIGURES_ENV, single_figures.clone()));
    }

    let mut status = None;
    if !citus_only {
        let mut postgres = Postgres::provide_for(purpose(&rest))?;
        let url = postgres.maintenance_url();
        // A benchmark that was interrupted leaves a database of a few GiB behind.
        postgres::drop_leftover_test_databases(&url);
        let mut bench = bench_command(name, &rest, &url, &extra_env);
        let outcome = run_bench(&mut bench, Some(&mut postgres));
        postgres.finish()?;
        status = Some(outcome?);
    }
    if on_citus && status.is_none_or(|status: std::process::ExitStatus| status.success()) {
        // The same benchmark on the coordinator of the cluster the test suite runs on,
        // durable here: the figures above travel in a file, and this run prints both
        // side by side.
        let cluster = crate::citus::RunningCluster::provide(crate::citus::Durability::Durable)?;
        cluster.cluster.drop_leftover_test_databases();
        extra_env.retain(|(key, _)| *key != crate::citus::FIGURES_ENV);
        extra_env.push((crate::citus::FIGURES_ENV, citus_figures));
        if !citus_only {
            extra_env.push((crate::citus::BASELINE_ENV, single_figures));
        }
        let mut bench = bench_command(name, &rest, &cluster.cluster.url("postgres"), &extra_env);
        bench.env(crate::citus::WORKERS_ENV, cluster.cluster.worker_urls());
        let outcome = run_bench(&mut bench, None);
        cluster.finish()?;
        status = Some(outcome?);
    }
    let status = status.ok_or("the benchmark did not run")?;
    note(&format!(
        "bench {name} finished in {}",
        system::format_duration(started.elapsed())
    ));
    if status.success() {
        Ok(())
    } else {
        Err(format!("the benchmark failed ({status})"))
    }
}

/// `cargo run --release -p mailroom-bench -- <name> <rest…>` against the maintenance
/// database `url`.
fn bench_command(name: &str, rest: &[String], url: &str, extra_env: &[(&str, PathBuf)]) -> Command {
    let mut bench = Command::new("cargo");
    bench
        .args(["run", "--release", "--package", "mailroom-bench", "--"])
        .arg(name)
        .args(rest)
        .env("DATABASE_URL", url)
        .envs(extra_env.iter().map(|(key, value)| (key, value)));
    bench
}

/// Runs `bench` to its end, telling the private cluster's watchdog about it when there is
/// one.
fn run_bench(
    bench: &mut Command,
    postgres: Option<&mut Postgres>,
) -> Result<std::process::ExitStatus> {
    eprintln!("$ {}", system::describe(bench));
    let mut child = bench
        .spawn()
        .map_err(|error| format!("could not run `{}`: {error}", system::describe(bench)))?;
    match postgres {
        Some(postgres) => {
            postgres.watch_child(child.id());
            let status = child.wait();
            postgres.child_finished();
            status
        }
        None => child.wait(),
    }
    .map_err(|error| format!("could not wait for the benchmark: {error}"))
}

/// `target/postfix` with `usr/sbin/smtp-sink` and `usr/sbin/smtp-source` (and the postfix
/// libraries they link), unpacked from the postfix package when missing.
fn unpack_postfix() -> Result<PathBuf> {
    let target = system::workspace_root().join("target/postfix");
    let sink = target.join("usr/sbin/smtp-sink");
    if sink.exists() && target.join("usr/sbin/smtp-source").exists() {
        return Ok(target);
    }
    if system::find_in_path("apt-get").is_none() || system::find_in_path("dpkg").is_none() {
        return Err(
            "smtp-sink is needed: apt-get and dpkg are not available to unpack the postfix package"
                .into(),
        );
    }
    let download = system::workspace_root().join("target/postfix-download");
    std::fs::create_dir_all(&download)
        .map_err(|error| format!("creating {}: {error}", download.display()))?;
    note(
        "unpacking smtp-sink and smtp-source from the postfix package (not installed, not started)",
    );
    let fetch = |update: bool| -> Result<()> {
        if update {
            system::run(
                Command::new("apt-get")
                    .arg("update")
                    .env("DEBIAN_FRONTEND", "noninteractive"),
            )?;
        }
        system::run(
            Command::new("apt-get")
                .args(["download", "postfix"])
                .current_dir(&download),
        )
    };
    // A fresh machine has no package lists yet; a known one needs no update.
    if fetch(false).is_err() {
        if !system::is_root() {
            return Err(
                "`apt-get download postfix` failed; run `sudo apt-get update` and try again".into(),
            );
        }
        fetch(true)?;
    }
    let package = std::fs::read_dir(&download)
        .map_err(|error| format!("reading {}: {error}", download.display()))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .find(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with("postfix_"))
                && path.extension().is_some_and(|extension| extension == "deb")
        })
        .ok_or("apt-get download postfix left no postfix_*.deb")?;
    system::run(Command::new("dpkg").arg("-x").arg(&package).arg(&target))?;
    if !sink.exists() {
        return Err(format!("{} is not in the postfix package", sink.display()));
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn a_benchmark_is_durable_unless_the_unsafe_flag_is_given() {
        assert_eq!(
            purpose(&words("--messages 30000 --single 5000")),
            Purpose::DurableBenchmark
        );
        assert_eq!(purpose(&[]), Purpose::DurableBenchmark);
        assert_eq!(
            purpose(&words("--messages 30000 --unsafe-fast-db")),
            Purpose::UnsafeFastBenchmark
        );
        // Only the exact flag opts out.
        assert_eq!(
            purpose(&words("--unsafe-fast-database")),
            Purpose::DurableBenchmark
        );
    }
}
