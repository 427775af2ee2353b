//! Where a durable run's time goes in PostgreSQL: commits, WAL and its flushes over a
//! measured phase, from `pg_stat_wal` and `pg_stat_database` (PostgreSQL 14 and later).
//!
//! On a durable server every commit that wrote something waits for its WAL to reach the
//! disk (an `fsync`, shared by the commits that arrive together: group commit), so commits
//! per message and fsyncs per message say what durability costs a message, and WAL bytes
//! per message what each one writes. `pg_stat_wal` is the whole server's: on a server
//! other work shares, those figures include theirs, so the report also prints the commits
//! of the other databases in the same phase.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use diesel::{
    connection::SimpleConnection, pg::PgConnection, sql_query, sql_types::BigInt,
    sql_types::Double, QueryableByName, RunQueryDsl,
};

use crate::stats::thousands;

/// The server's counters at one moment.
#[derive(Debug, Clone, Copy, QueryableByName)]
pub struct WalCounters {
    /// WAL records, full-page images and bytes generated (`pg_stat_wal`).
    #[diesel(sql_type = BigInt)]
    records: i64,
    #[diesel(sql_type = BigInt)]
    full_page_images: i64,
    #[diesel(sql_type = Double)]
    bytes: f64,
    /// WAL buffers written out (`wal_write`) and synced to disk (`wal_sync`: zero with
    /// fsync off).
    #[diesel(sql_type = BigInt)]
    writes: i64,
    #[diesel(sql_type = BigInt)]
    syncs: i64,
    /// The next transaction id: its growth counts the transactions that wrote something
    /// (read-only ones get no id), in every database.
    #[diesel(sql_type = BigInt)]
    next_xid: i64,
    /// Commits in the connection's database and in all the others (`pg_stat_database`).
    #[diesel(sql_type = BigInt)]
    commits_here: i64,
    #[diesel(sql_type = BigInt)]
    commits_elsewhere: i64,
}

/// The reading's statement; marked so pg_stat_statements figures can leave it out.
const READING: &str = "/* bench */ SELECT w.wal_records::bigint AS records, \
     w.wal_fpi::bigint AS full_page_images, w.wal_bytes::float8 AS bytes, \
     w.wal_write::bigint AS writes, w.wal_sync::bigint AS syncs, \
     pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS next_xid, \
     (SELECT coalesce(sum(xact_commit), 0)::bigint FROM pg_stat_database \
        WHERE datname = current_database()) AS commits_here, \
     (SELECT coalesce(sum(xact_commit), 0)::bigint FROM pg_stat_database \
        WHERE datname IS DISTINCT FROM current_database()) AS commits_elsewhere \
     FROM pg_stat_wal AS w";

/// Transactions one [`WalCounters::read`] runs on its connection.
pub const READING_TRANSACTIONS: i64 = 3;

impl WalCounters {
    /// The counters now, as a fresh statistics snapshot has them (statistics reach it
    /// when a session flushes them: at its end, or about once a second while it works).
    pub fn read(sql: &mut PgConnection) -> Result<(Self, Instant)> {
        // The bench connection's own counts first (PostgreSQL 15 and later flush them as the
        // statement ends; older servers refuse the call and report them within a second).
        let _ = sql.batch_execute("/* bench */ SELECT pg_stat_force_next_flush()");
        sql.batch_execute("/* bench */ SELECT pg_stat_clear_snapshot()")?;
        let counters = sql_query(READING)
            .get_result::<Self>(sql)
            .context("reading pg_stat_wal (PostgreSQL 14 and later)")?;
        Ok((counters, Instant::now()))
    }
}

/// What a phase cost, between two readings.
#[derive(Debug, Clone, Copy)]
pub struct WalPhase {
    pub commits: i64,
    pub write_transactions: i64,
    pub records: i64,
    pub full_page_images: i64,
    pub bytes: f64,
    pub writes: i64,
    pub syncs: i64,
    pub commits_elsewhere: i64,
    pub elapsed: Duration,
    /// The bench's own transactions in the phase (its progress reads and these
    /// readings), left out of `commits`.
    pub own_transactions: i64,
}

impl WalPhase {
    /// From `before` to `after`, leaving `own_transactions` (read-only: they wrote no WAL)
    /// out of the commits.
    pub fn between(
        (before, started): (WalCounters, Instant),
        (after, ended): (WalCounters, Instant),
        own_transactions: i64,
    ) -> Self {
        Self {
            commits: (after.commits_here - before.commits_here - own_transactions).max(0),
            write_transactions: after.next_xid - before.next_xid,
            records: after.records - before.records,
            full_page_images: after.full_page_images - before.full_page_images,
            bytes: after.bytes - before.bytes,
            writes: after.writes - before.writes,
            syncs: after.syncs - before.syncs,
            commits_elsewhere: after.commits_elsewhere - before.commits_elsewhere,
            elapsed: ended.saturating_duration_since(started),
            own_transactions,
        }
    }

    /// The report's lines for `count` items of `unit` ("message", "contact").
    pub fn lines(&self, count: u64, unit: &str) -> Vec<String> {
        let per = |value: f64| value / count.max(1) as f64;
        let per_second = |value: i64| value as f64 / self.elapsed.as_secs_f64().max(1e-9);
        let mut lines = vec![
            format!(
                "  commits                {:>10} ({:.2} per {unit}, {:.0}/s; the bench's own {} \
                 read-only transactions left out)",
                thousands(self.commits.max(0) as u64),
                per(self.commits as f64),
                per_second(self.commits),
                self.own_transactions
            ),
            format!(
                "  writing transactions   {:>10} ({:.2} per {unit}: those given a transaction id, \
                 so a commit record to flush; the whole server's)",
                thousands(self.write_transactions.max(0) as u64),
                per(self.write_transactions as f64),
            ),
            format!(
                "  WAL                    {:>10.1} MB ({:.0} bytes, {:.2} records, {:.3} full-page \
                 images per {unit})",
                self.bytes / 1e6,
                per(self.bytes),
                per(self.records as f64),
                per(self.full_page_images as f64),
            ),
            format!(
                "  WAL writes, fsyncs     {:>10} ({:.3} writes, {:.3} fsyncs per {unit}; {:.0} \
                 fsyncs/s; {} writing transactions per fsync)",
                format!(
                    "{}, {}",
                    thousands(self.writes.max(0) as u64),
                    thousands(self.syncs.max(0) as u64)
                ),
                per(self.writes as f64),
                per(self.syncs as f64),
                per_second(self.syncs),
                if self.syncs > 0 {
                    format!("{:.2}", self.write_transactions as f64 / self.syncs as f64)
                } else {
                    "n/a".to_owned()
                },
            ),
        ];
        if self.commits_elsewhere > 0 {
            lines.push(format!(
                "  other databases        {:>10} commits in the same phase: the WAL figures above \
                 are the server's and include their work",
                thousands(self.commits_elsewhere as u64)
            ));
        }
        lines
    }

    pub fn print(&self, count: u64, unit: &str) {
        for line in self.lines(count, unit) {
            report!("{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(scale: i64, elsewhere: i64) -> WalCounters {
        WalCounters {
            records: 3 * scale,
            full_page_images: scale / 100,
            bytes: 5_000.0 * scale as f64,
            writes: scale / 2,
            syncs: scale / 4,
            next_xid: 1_000 + scale,
            commits_here: 10 + 2 * scale,
            commits_elsewhere: elsewhere,
        }
    }

    #[test]
    fn a_phase_is_the_difference_per_item_without_the_bench_s_own_reads() {
        let start = Instant::now();
        let phase = WalPhase::between(
            (counters(0, 7), start),
            (counters(1_000, 7), start + Duration::from_secs(2)),
            40,
        );
        assert_eq!(phase.commits, 2_000 - 40);
        assert_eq!(phase.write_transactions, 1_000);
        assert_eq!(phase.syncs, 250);
        let lines = phase.lines(1_000, "message");
        assert!(lines[0].contains("1.96 per message"), "{}", lines[0]);
        assert!(
            lines[2].contains("5000 bytes, 3.00 records"),
            "{}",
            lines[2]
        );
        assert!(lines[3].contains("125 fsyncs/s"), "{}", lines[3]);
        assert!(
            lines[3].contains("4.00 writing transactions per fsync"),
            "{}",
            lines[3]
        );
        // Nobody else committed: no line about it.
        assert_eq!(lines.len(), 4);

        let shared = WalPhase::between(
            (counters(0, 7), start),
            (counters(1_000, 19), start + Duration::from_secs(2)),
            0,
        );
        let lines = shared.lines(1_000, "message");
        assert!(lines[4].contains("12 commits"), "{}", lines[4]);
    }

    #[test]
    fn without_fsyncs_the_ratio_is_not_invented() {
        let start = Instant::now();
        let mut after = counters(100, 0);
        after.syncs = 0;
        let mut before = counters(0, 0);
        before.syncs = 0;
        let phase = WalPhase::between((before, start), (after, start), 0);
        assert!(phase.lines(100, "message")[3].contains("n/a"));
    }
}
