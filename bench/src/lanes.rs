//! `mailroom-bench lanes [--seconds S]`: where the lane tables serve the claim best on
//! Citus. The lanes are one row per account with work waiting; every claim locks the
//! earliest due ones across accounts with `FOR UPDATE SKIP LOCKED` and moves them on in
//! the same transaction (crates/postgres/src/queue.rs). The same table of 1,000 lanes is
//! made three ways on the test cluster (`cargo xtask bench lanes`): local to the
//! coordinator (Mailroom's choice), a reference table (a copy on every node), and
//! distributed by account; `pgbench` runs the lane half of a claim against each for S
//! seconds (default 10) with 8 clients: lock one due lane, move it on, commit.

use std::{path::Path, process::Command};

use anyhow::{bail, Context, Result};
use diesel::{connection::SimpleConnection, pg::PgConnection, Connection};

use mailroom_test_support::{on_citus, TestDatabase};

const USAGE: &str = "Usage: mailroom-bench lanes [--seconds S]  (1 ≤ S ≤ 600, default 10)";
const PGBENCH: &str = "/usr/bin/pgbench";
const CLIENTS: u32 = 8;
const LANES: u32 = 1_000;

pub fn main(args: &[String]) -> std::process::ExitCode {
    let mut seconds: u64 = 10;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        match (
            flag.as_str(),
            rest.next().and_then(|value| value.parse().ok()),
        ) {
            ("--seconds", Some(number)) if (1..=600).contains(&number) => seconds = number,
            _ => {
                eprintln!("{USAGE}");
                return std::process::ExitCode::from(2);
            }
        }
    }
    match run(seconds) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("mailroom-bench: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(seconds: u64) -> Result<()> {
    if !on_citus() {
        bail!("the lanes are measured on a Citus cluster: run `cargo xtask bench lanes`");
    }
    let database = TestDatabase::create_empty();
    let url = database.url();
    let mut sql = PgConnection::establish(url)?;
    let placements = [
        ("local to the coordinator", "lanes_local", ""),
        (
            "reference table",
            "lanes_reference",
            "SELECT create_reference_table('lanes_reference');",
        ),
        (
            "distributed by account",
            "lanes_distributed",
            "SELECT create_distributed_table('lanes_distributed', 'account_id');",
        ),
    ];
    for (_, table, place) in &placements {
        sql.batch_execute(&format!(
            "CREATE TABLE {table} (account_id uuid PRIMARY KEY, next_due_at timestamptz);
             CREATE INDEX ON {table} (next_due_at) WHERE next_due_at IS NOT NULL;
             {place}
             INSERT INTO {table} SELECT gen_random_uuid(), now() - n * interval '1 ms'
             FROM generate_series(1, {LANES}) AS n;"
        ))
        .with_context(|| format!("making {table}"))?;
    }
    report!(
        "== The lane half of a claim on Citus: {LANES} due lanes, {CLIENTS} pgbench clients × {seconds} s each"
    );
    for (label, table, _) in &placements {
        let script = std::env::temp_dir().join(format!("mailroom-bench-{table}.sql"));
        std::fs::write(
            &script,
            format!(
                "BEGIN;\n\
                 SELECT quote_literal(account_id) AS lane FROM {table} \
                 WHERE next_due_at <= now() ORDER BY next_due_at LIMIT 1 \
                 FOR UPDATE SKIP LOCKED \\gset\n\
                 UPDATE {table} SET next_due_at = now() WHERE account_id = :lane;\n\
                 COMMIT;\n"
            ),
        )?;
        let output = Command::new(Path::new(PGBENCH))
            .args(["--no-vacuum", "--protocol=simple", "--jobs=2"])
            .arg(format!("--client={CLIENTS}"))
            .arg(format!("--time={seconds}"))
            .arg(format!("--file={}", script.display()))
            .arg(url)
            .output()
            .context("running pgbench")?;
        let _ = std::fs::remove_file(&script);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let value = |prefix: &str| {
            stdout
                .lines()
                .find_map(|line| line.trim().strip_prefix(prefix))
                .and_then(|rest| rest.split_whitespace().next())
                .map(str::to_owned)
        };
        match (output.status.success(), value("tps = ")) {
            (true, Some(tps)) => report!(
                "  {label:<26} {:>10.0} claims/s, latency average {} ms, failed {}",
                tps.parse::<f64>().unwrap_or_default(),
                value("latency average = ").unwrap_or_default(),
                value("number of failed transactions: ").unwrap_or_else(|| "0".into())
            ),
            _ => report!(
                "  {label:<26} refused: {}",
                stderr
                    .lines()
                    .find_map(|line| line.split_once("ERROR:").map(|(_, error)| error.trim()))
                    .unwrap_or("pgbench failed")
            ),
        }
    }
    Ok(())
}
