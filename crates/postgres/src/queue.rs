//! Claiming work from an outbox table with `FOR UPDATE SKIP LOCKED` and a lease: the
//! webhook events' queue. The message outbox claims per account through its due lanes
//! instead (`repositories/messages.rs`; docs/operations.md, "Delivery engine").
//!
//! A queue table follows one convention:
//!
//! | column            | type          | meaning                                          |
//! |-------------------|---------------|--------------------------------------------------|
//! | `account_id`, `id`| `uuid`        | the primary key                                  |
//! | `status`          | `text`        | pending statuses are listed in [`LeasedQueue`]   |
//! | `next_attempt_at` | `timestamptz` | when a pending row is due                        |
//! | `locked_until`    | `timestamptz` | the lease's end, `NULL` when not leased          |
//! | `lease_token`     | `uuid`        | the lease's holder, `NULL` when not leased       |
//!
//! and carries a partial index on `(next_attempt_at) WHERE status IN (<pending>)`.
//!
//! Why a lease and not a long transaction: the work (an HTTP call, an SMTP session) must
//! not run inside a transaction, so the row lock of `FOR UPDATE` only lasts as long as the
//! claiming statement. The lease keeps other workers off the row afterwards, and when the
//! holder dies it simply runs out and the row is claimed again. The holder writes its
//! outcome with `WHERE lease_token = <its token>`, so a worker whose lease ran out cannot
//! overwrite the outcome of the worker that took over.

use diesel::{
    pg::{Pg, PgConnection},
    sql_query,
    sql_types::{Array, BigInt, Timestamptz, Uuid as SqlUuid},
    QueryResult, QueryableByName, RunQueryDsl,
};
use time::OffsetDateTime;
use uuid::Uuid;

/// A table that follows the queue convention of this module.
pub(crate) struct LeasedQueue {
    /// The table name.
    pub table: &'static str,
    /// The statuses of rows waiting for a worker (written into the SQL as literals, so
    /// they must be plain lowercase words; the partial index repeats them).
    pub pending: &'static [&'static str],
}

impl LeasedQueue {
    fn pending_list(&self) -> String {
        let quoted: Vec<String> = self
            .pending
            .iter()
            .map(|status| {
                assert!(
                    status.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                    "queue status {status:?} must be a plain word"
                );
                format!("'{status}'")
            })
            .collect();
        quoted.join(", ")
    }
}

/// Leases up to `limit` rows of `queue` of any account but `skip_accounts` (whose
/// deliveries are saturated in the claiming worker) that are pending, due at `now` and
/// not leased (or whose lease ran out), earliest due first, to `token` until `until`, and returns them as
/// they are after the update. Rows locked by a concurrent claim are skipped, not waited
/// for, so concurrent workers split the queue instead of queueing behind each other.
pub(crate) fn claim_due<R>(
    conn: &mut PgConnection,
    queue: &LeasedQueue,
    now: OffsetDateTime,
    token: Uuid,
    until: OffsetDateTime,
    limit: i64,
    skip_accounts: &[Uuid],
) -> QueryResult<Vec<R>>
where
    R: QueryableByName<Pg> + 'static,
{
    let table = queue.table;
    let pending = queue.pending_list();
    // One statement: the inner SELECT locks the due rows (skipping locked ones), the
    // UPDATE stamps the lease, and the row locks are released when it commits.
    let query = sql_query(format!(
        "UPDATE {table} AS queued SET locked_until = $1, lease_token = $2 \
         FROM (SELECT account_id, id FROM {table} \
               WHERE status IN ({pending}) AND next_attempt_at <= $3 \
                 AND (locked_until IS NULL OR locked_until <= $3) \
                 AND account_id <> ALL($5) \
               ORDER BY next_attempt_at \
               LIMIT $4 \
               FOR UPDATE SKIP LOCKED) AS due \
         WHERE queued.account_id = due.account_id AND queued.id = due.id \
         RETURNING queued.*"
    ))
    .bind::<Timestamptz, _>(until)
    .bind::<SqlUuid, _>(token)
    .bind::<Timestamptz, _>(now)
    .bind::<BigInt, _>(limit)
    .bind::<Array<SqlUuid>, _>(skip_accounts.to_vec());
    query.load(conn)
}
