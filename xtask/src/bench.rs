//! `cargo xtask bench audience [args…]`: the audience benchmark (`bench/`, package
//! `mailroom-bench`) in release mode against the PostgreSQL that discovery finds, the
//! same one `test` uses. The benchmark creates and drops a database of its own there.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::postgres::{self, Postgres};
use crate::system::{self, note};
use crate::Result;

/// The benchmarks `mailroom-bench` knows.
const BENCHMARKS: [&str; 3] = ["audience", "webhooks", "announcement"];
/// The benchmark compares the API with pgbench from the system's PostgreSQL tools.
const PGBENCH: &str = "/usr/bin/pgbench";

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
    let mut postgres = Postgres::provide()?;
    let url = postgres.maintenance_url();
    // A benchmark that was interrupted leaves a database of a few GiB behind.
    postgres::drop_leftover_test_databases(&url);

    let mut bench = Command::new("cargo");
    bench
        .args(["run", "--release", "--package", "mailroom-bench", "--"])
        .arg(name)
        .args(rest)
        .env("DATABASE_URL", &url);
    eprintln!("$ {}", system::describe(&bench));
    let started = Instant::now();
    let mut child = bench
        .spawn()
        .map_err(|error| format!("could not run `{}`: {error}", system::describe(&bench)))?;
    postgres.watch_child(child.id());
    let status = child.wait();
    postgres.child_finished();
    postgres.finish()?;
    let status = status.map_err(|error| format!("could not wait for the benchmark: {error}"))?;
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
