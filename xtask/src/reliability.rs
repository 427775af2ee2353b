//! `cargo xtask reliability [args…]`: the long reliability tests, which the normal suite
//! skips because they are `#[ignore]`d (the 60 s load test among them).
//!
//! Runs `cargo nextest run --workspace --run-ignored only --no-fail-fast
//! --test-threads 1 --success-output immediate <args>` against the discovered
//! PostgreSQL: one test at a time, since each measures the machine, and with the output
//! of passing tests shown, since the figures they print are the point. Extra args go to
//! nextest (e.g. `-E 'test(/load/)'` for the load test alone).

use std::env;
use std::process::Command;
use std::time::Instant;

use crate::postgres::{self, Postgres};
use crate::system::{self, note};
use crate::Result;

pub fn run(args: &[String]) -> Result<()> {
    let started = Instant::now();
    let outcome = run_ignored(args);
    note(&format!(
        "reliability {} in {}",
        if outcome.is_ok() { "passed" } else { "failed" },
        system::format_duration(started.elapsed())
    ));
    outcome
}

fn run_ignored(args: &[String]) -> Result<()> {
    postgres::ensure_libpq()?;
    let mut postgres = Postgres::provide()?;
    let url = postgres.maintenance_url();
    postgres::drop_leftover_test_databases(&url);
    let mut command = Command::new("cargo");
    if env::var_os("CI").is_some() {
        command.env("CARGO_TERM_COLOR", "never");
    }
    command
        .args(["nextest", "run", "--workspace", "--run-ignored", "only"])
        .args(["--no-fail-fast", "--test-threads", "1"])
        .args(["--success-output", "immediate"])
        .args(args)
        .env("DATABASE_URL", &url);
    eprintln!("$ {}", system::describe(&command));
    let mut child = command
        .spawn()
        .map_err(|error| format!("could not run `{}`: {error}", system::describe(&command)))?;
    postgres.watch_child(child.id());
    let status = child
        .wait()
        .map_err(|error| format!("could not wait for cargo nextest: {error}"));
    postgres.child_finished();
    postgres.finish()?;
    if status?.success() {
        Ok(())
    } else {
        Err("reliability tests failed".to_owned())
    }
}
