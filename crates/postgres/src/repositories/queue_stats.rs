//! The metrics snapshot. Each query is bounded so a scrape stays cheap on large tables:
//!
//! - Queue depth and lag read only pending rows, through the partial indexes over them
//!   (`messages_account_due_idx`, `webhook_events_account_due_idx`).
//! - Messages by status: a table of at most [`EXACT_UP_TO`] rows is counted with one
//!   `GROUP BY`. Past that (decided by a probe that stops at `EXACT_UP_TO + 1` rows),
//!   the pending statuses are still exact (from the depth query, which reads only the
//!   pending rows), and the final ones (`sent`, `failed`, …, the bulk of the table) are
//!   estimated from the planner's statistics (`pg_class.reltuples` times the status's
//!   frequency in `pg_stats`), which autovacuum keeps fresh. Counting them would read
//!   the whole table on every scrape.
//!
//! The depth query visits the pending rows only; a full `GROUP BY status` would grow with
//! the table (docs/performance.md, "Reads that stay cheap", has the figures).
//!
//! A `SET LOCAL statement_timeout` bounds the whole snapshot, so a slow database makes
//! the scrape fail rather than pile up.

use diesel::{
    pg::Pg,
    sql_query,
    sql_types::{BigInt, Double, Nullable, Text, Timestamptz},
    ExpressionMethods, QueryDsl, QueryableByName, RunQueryDsl,
};
use mailroom_app::{
    ports::{QueueDepth, QueueStats, QueueStatsRepository},
    StoreError,
};
use mailroom_domain::{message::MessageStatus, Timestamp};
use time::OffsetDateTime;

use super::PgUnitOfWork;
use crate::error::store_error;

/// Up to this many messages, every status is counted exactly.
const EXACT_UP_TO: i64 = 100_000;

#[derive(QueryableByName)]
#[diesel(check_for_backend(Pg))]
struct DepthRow {
    #[diesel(sql_type = BigInt)]
    pending: i64,
    #[diesel(sql_type = BigInt)]
    first_status: i64,
    #[diesel(sql_type = BigInt)]
    due: i64,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    oldest_due: Option<OffsetDateTime>,
}

#[derive(QueryableByName)]
#[diesel(check_for_backend(Pg))]
struct StatusCount {
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = Double)]
    rows: f64,
}

#[derive(QueryableByName)]
#[diesel(check_for_backend(Pg))]
struct Count {
    #[diesel(sql_type = BigInt)]
    rows: i64,
}

/// Which rows of a queue table are pending, and which of those are in the first pending
/// state, as SQL conditions (constants of this module, never input).
struct PendingRows {
    table: &'static str,
    pending: &'static str,
    first: &'static str,
}

/// Messages waiting or in flight (both stored as `queued`, migration 35); the first state
/// is `queued` (no lease), the rest are `sending`.
const PENDING_MESSAGES: PendingRows = PendingRows {
    table: "messages",
    pending: "status = 'queued'",
    first: "lease_token IS NULL",
};

/// Webhook events waiting for their first attempt (`queued`) or a retry.
const PENDING_WEBHOOK_EVENTS: PendingRows = PendingRows {
    table: "webhook_events",
    pending: "status IN ('queued', 'retrying')",
    first: "status = 'queued'",
};

/// The depth of a queue table, and how many pending rows are in its first pending state.
fn depth(
    conn: &mut diesel::PgConnection,
    rows: &PendingRows,
    now: OffsetDateTime,
) -> Result<(QueueDepth, u64), StoreError> {
    let PendingRows {
        table,
        pending,
        first,
    } = rows;
    let row: DepthRow = sql_query(format!(
        "SELECT count(*) AS pending, \
                count(*) FILTER (WHERE {first}) AS first_status, \
                count(*) FILTER (WHERE next_attempt_at <= $1 \
                                 AND (locked_until IS NULL OR locked_until < $1)) AS due, \
                min(next_attempt_at) FILTER (WHERE next_attempt_at <= $1 \
                                 AND (locked_until IS NULL OR locked_until < $1)) AS oldest_due \
         FROM {table} WHERE {pending}"
    ))
    .bind::<Timestamptz, _>(now)
    .get_result(conn)
    .map_err(store_error)?;
    let age = row
        .oldest_due
        .map_or(0.0, |oldest| (now - oldest).as_seconds_f64().max(0.0));
    Ok((
        QueueDepth {
            pending: u64::try_from(row.pending).unwrap_or(0),
            due: u64::try_from(row.due).unwrap_or(0),
            oldest_due_age_secs: age,
        },
        u64::try_from(row.first_status).unwrap_or(0),
    ))
}

/// Messages by status; `queued` and `sending` are given (exact, from the depth query) and
/// used when the table is too large to count.
fn messages_by_status(
    conn: &mut diesel::PgConnection,
    queued: u64,
    sending: u64,
) -> Result<(Vec<(MessageStatus, u64)>, bool), StoreError> {
    let probe: Count = sql_query(format!(
        "SELECT count(*) AS rows FROM (SELECT 1 FROM messages LIMIT {}) AS probe",
        EXACT_UP_TO + 1
    ))
    .get_result(conn)
    .map_err(store_error)?;
    let exact = probe.rows <= EXACT_UP_TO;
    let counts: Vec<StatusCount> = if exact {
        sql_query(
            "SELECT message_state(status, lease_token) AS status, count(*)::float8 AS rows \
             FROM messages GROUP BY 1",
        )
        .load(conn)
        .map_err(store_error)?
    } else {
        sql_query(
            "SELECT s.status, s.freq * greatest(c.reltuples, 0)::float8 AS rows \
             FROM pg_class AS c, pg_stats AS st, \
                  unnest(st.most_common_vals::text::text[], st.most_common_freqs) \
                      AS s(status, freq) \
             WHERE c.oid = 'messages'::regclass \
               AND st.schemaname = current_schema() AND st.tablename = 'messages' \
               AND st.attname = 'status' \
               AND s.status NOT IN ('queued', 'sending')",
        )
        .load(conn)
        .map_err(store_error)?
    };
    let by_status = MessageStatus::ALL
        .into_iter()
        .map(|status| {
            if !exact && !status.is_final() {
                let given = if status == MessageStatus::Queued {
                    queued
                } else {
                    sending
                };
                return (status, given);
            }
            let rows: f64 = counts
                .iter()
                .filter(|count| count.status == status.as_str())
                .map(|count| count.rows)
                .sum();
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            (status, rows.round().max(0.0) as u64)
        })
        .collect();
    Ok((by_status, exact))
}

impl QueueStatsRepository for PgUnitOfWork<'_> {
    fn queue_stats(&mut self, now: Timestamp) -> Result<QueueStats, StoreError> {
        sql_query("SET LOCAL statement_timeout = '5s'")
            .execute(self.conn)
            .map_err(store_error)?;
        let now = now.as_datetime();
        // The gauges of the whole service: on Citus every statement reads every shard.
        crate::citus::fan_out(self.conn, |conn| {
            let (messages, queued) = depth(conn, &PENDING_MESSAGES, now)?;
            let (webhook_events, _) = depth(conn, &PENDING_WEBHOOK_EVENTS, now)?;
            let (messages_by_status, message_counts_exact) =
                messages_by_status(conn, queued, messages.pending.saturating_sub(queued))?;
            // Through the partial index `mail_servers_unhealthy_idx`: only unhealthy rows.
            let unhealthy_mail_servers = crate::schema::mail_servers::table
                .filter(crate::schema::mail_servers::unhealthy_since.is_not_null())
                .count()
                .get_result::<i64>(conn)
                .map_err(store_error)?;
            Ok(QueueStats {
                messages,
                webhook_events,
                messages_by_status,
                message_counts_exact,
                unhealthy_mail_servers: u64::try_from(unhealthy_mail_servers).unwrap_or(0),
            })
        })
    }
}
