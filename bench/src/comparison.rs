//! One benchmark on one PostgreSQL and on a Citus cluster, in one `cargo xtask bench …
//! --citus` run: xtask runs the benchmark twice, first on the single server, then on the
//! cluster's coordinator, and this module carries the headline figures from the first
//! process to the second, which prints them side by side with their ratios and targets.
//!
//! [`FIGURES_ENV`] names the file a run writes its figures to, one `name value` line
//! each; [`BASELINE_ENV`] names the single server's file, which the run on Citus reads.
//! The two runs measure the same machine (both databases durable), so the ratio is the
//! cost of distribution, not a speed-up: every node shares the two cores.

use std::{collections::BTreeMap, fs, io::Write};

use crate::stats::{ratio, verdict};

/// Where this run writes its figures (set by xtask on both runs).
pub const FIGURES_ENV: &str = "MAILROOM_BENCH_FIGURES";
/// The single server's figures, set by xtask on the run on Citus.
pub const BASELINE_ENV: &str = "MAILROOM_BENCH_BASELINE";

/// A figure both runs report, with what the distributed one must reach.
pub struct Figure {
    pub name: &'static str,
    pub label: &'static str,
    pub target: Goal,
}

/// How the Citus figure compares with the single server's.
pub enum Goal {
    /// A rate: Citus at least this share of the single server's.
    AtLeast(f64),
    /// A latency: Citus at most this multiple of the single server's.
    AtMost(f64),
    /// Shown for context, without a target.
    None,
}

/// Records `value` as this run's `name` figure (nothing when no file is named).
pub fn record(name: &str, value: f64) {
    let Some(path) = std::env::var_os(FIGURES_ENV) else {
        return;
    };
    let written = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut file| writeln!(file, "{name} {value}"));
    if let Err(error) = written {
        eprintln!(
            "mailroom-bench: cannot record {name} in {}: {error}",
            path.to_string_lossy()
        );
    }
}

fn read(path: &std::ffi::OsStr) -> BTreeMap<String, f64> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let (name, value) = line.split_once(' ')?;
            Some((name.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// On the run on Citus, prints `figures` beside the single server's, with the ratios and
/// whether each target is met; elsewhere nothing.
pub fn print(figures: &[Figure]) {
    let (Some(baseline), Some(own)) = (
        std::env::var_os(BASELINE_ENV),
        std::env::var_os(FIGURES_ENV),
    ) else {
        return;
    };
    let (single, citus) = (read(&baseline), read(&own));
    report!(
        "\n== Citus (coordinator and two workers on this machine) beside one PostgreSQL, same run"
    );
    report!(
        "  {:<34} {:>14} {:>14} {:>8}  target",
        "",
        "one server",
        "Citus",
        "ratio"
    );
    for figure in figures {
        let (Some(one), Some(distributed)) = (single.get(figure.name), citus.get(figure.name))
        else {
            report!("  {:<34} not measured on both", figure.label);
            continue;
        };
        let (wanted, met) = match figure.target {
            Goal::AtLeast(share) => (format!("≥ {share}×"), *distributed >= share * one),
            Goal::AtMost(multiple) => (format!("≤ {multiple}×"), *distributed <= multiple * one),
            Goal::None => (String::new(), true),
        };
        let verdict = if matches!(figure.target, Goal::None) {
            ""
        } else {
            verdict(met)
        };
        report!(
            "  {:<34} {:>14.1} {:>14.1} {:>8}  {wanted} {}",
            figure.label,
            one,
            distributed,
            ratio(*distributed, *one),
            verdict
        );
    }
}
