//! `cargo xtask reliability [args…]`: the long reliability tests, which the normal suite
//! skips because they are `#[ignore]`d (the 60 s load test among them).
//!
//! Runs `cargo nextest run --workspace --run-ignored only --no-fail-fast
//! --test-threads 1 --success-output immediate <args>` against the discovered
//! PostgreSQL: one test at a time, since each measures the machine, and with the output
//! of passing tests shown, since the figures they print are the point. Extra args go to
//! nextest (e.g. `-E 'test(/load/)'` for the load test alone). cargo-nextest is
//! installed when missing (see [`TestRunner`]); where that fails, the same tests run with
//! `cargo test … -- --ignored --test-threads 1 --nocapture` (which takes no nextest
//! arguments).

use std::process::Command;
use std::time::Instant;

use crate::commands::{cargo, TestRunner};
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

/// The command that runs the ignored tests with `runner`.
pub fn command(runner: TestRunner, args: &[String]) -> Result<Command> {
    let mut command = cargo();
    match runner {
        TestRunner::Nextest => {
            command
                .args(["nextest", "run", "--workspace", "--run-ignored", "only"])
                .args(["--no-fail-fast", "--test-threads", "1"])
                .args(["--success-output", "immediate"])
                .args(args);
        }
        TestRunner::CargoTest if args.is_empty() => {
            command
                .args(["test", "--workspace", "--tests", "--no-fail-fast", "--"])
                .args(["--ignored", "--test-threads", "1", "--nocapture"]);
        }
        TestRunner::CargoTest => {
            return Err(format!(
                "`{}` are nextest arguments, and no working cargo-nextest is installed \
                 (`cargo install cargo-nextest --locked`)",
                args.join(" ")
            ))
        }
    }
    Ok(command)
}

fn run_ignored(args: &[String]) -> Result<()> {
    let mut command = command(TestRunner::provide(), args)?;
    postgres::ensure_libpq()?;
    let mut postgres = Postgres::provide()?;
    let url = postgres.maintenance_url();
    postgres::drop_leftover_test_databases(&url);
    command.env("DATABASE_URL", &url);
    eprintln!("$ {}", system::describe(&command));
    let mut child = command
        .spawn()
        .map_err(|error| format!("could not run `{}`: {error}", system::describe(&command)))?;
    postgres.watch_child(child.id());
    let status = child
        .wait()
        .map_err(|error| format!("could not wait for the reliability tests: {error}"));
    postgres.child_finished();
    postgres.finish()?;
    if status?.success() {
        Ok(())
    } else {
        Err("reliability tests failed".to_owned())
    }
}
