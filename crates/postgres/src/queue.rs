//! Claiming work from an outbox table with `FOR UPDATE SKIP LOCKED` and a lease, one
//! account at a time through a table of due lanes: the webhook events' queue
//! (`webhook_events`, `webhook_lanes`), and the lane lock the message outbox shares (its
//! claim and reschedule are its own: a message in flight is stored as `queued` with a
//! lease, so its partial indexes name one status and it has no index of leased rows;
//! `repositories/messages.rs`; docs/operations.md, "Delivery engine").
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
//! and carries a partial index on `(account_id, next_attempt_at) WHERE status IN
//! (<pending>)` and one on `(account_id) WHERE lease_token IS NOT NULL`. Its lanes table
//! has one row per account, `(account_id, next_due_at)`, brought forward by the repository
//! in the transaction of every write that makes a row pending
//! (`crate::upkeep::bring_lanes_forward`).
//!
//! Why a lease and not a long transaction: the work (an HTTP call, an SMTP session) must
//! not run inside a transaction, so the row lock of `FOR UPDATE` only lasts as long as the
//! claiming statement. The lease keeps other workers off the row afterwards, and when the
//! holder dies it simply runs out and the row is claimed again. The holder writes its
//! outcome with `WHERE lease_token = <its token>`, so a worker whose lease ran out cannot
//! overwrite the outcome of the worker that took over.
//!
//! Why lanes: a claim across every account's rows lets one account's backlog fill whole
//! claims, and steps over the rows of every account the worker skips, one by one. A lane
//! claim reads a small table, then each account's rows with `account_id` in the WHERE
//! clause (one shard on Citus), at most what that account may take.

use diesel::{
    pg::{Pg, PgConnection},
    sql_query,
    sql_types::{Array, BigInt, Timestamptz, Uuid as SqlUuid},
    QueryResult, QueryableByName, RunQueryDsl,
};
use mailroom_app::StoreError;
use mailroom_domain::{AccountId, Timestamp};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::{error::store_error, prepared_sql::prepared_sql};

/// A table that follows the queue convention of this module.
pub(crate) struct LeasedQueue {
    /// The table name.
    pub table: &'static str,
    /// Its lanes table.
    pub lanes: &'static str,
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

/// Locks up to `limit` rows of the lanes table `lanes` (accounts whose next row is due at
/// `now`), earliest due first, leaving out `skip_accounts` and lanes another claim holds
/// (skipped, never waited for). The locks last until the transaction ends.
pub(crate) fn lock_due_lanes(
    conn: &mut PgConnection,
    lanes: &str,
    now: Timestamp,
    limit: u32,
    skip_accounts: &[AccountId],
) -> Result<Vec<AccountId>, StoreError> {
    let skip: Vec<Uuid> = skip_accounts.iter().map(|id| id.as_uuid()).collect();
    // `lanes` is a constant of this crate, never input.
    let rows: Vec<LaneRow> = prepared_sql(format!(
        "SELECT account_id FROM {lanes} \
         WHERE next_due_at <= $1 AND account_id <> ALL($2) \
         ORDER BY next_due_at LIMIT $3 \
         FOR UPDATE SKIP LOCKED"
    ))
    .bind::<Timestamptz, _>(now.as_datetime())
    .bind::<Array<SqlUuid>, _>(skip)
    .bind::<BigInt, _>(i64::from(limit))
    .load(conn)
    .map_err(store_error)?;
    Ok(rows
        .into_iter()
        .map(|row| AccountId::from_uuid(row.account_id))
        .collect())
}

#[derive(QueryableByName)]
struct LaneRow {
    #[diesel(sql_type = SqlUuid)]
    account_id: Uuid,
}

/// Leases up to `limit` rows of `queue` of `account` that are pending, due at `now` and
/// not leased (or whose lease ran out), earliest due first, to `token` until `until`, and
/// returns them as they are after the update. Rows locked by a concurrent claim are
/// skipped, not waited for, so concurrent workers split the queue instead of queueing
/// behind each other.
pub(crate) fn claim_due<R>(
    conn: &mut PgConnection,
    queue: &LeasedQueue,
    account: Uuid,
    now: OffsetDateTime,
    token: Uuid,
    until: OffsetDateTime,
    limit: i64,
) -> QueryResult<Vec<R>>
where
    R: QueryableByName<Pg> + 'static,
{
    let table = queue.table;
    let pending = queue.pending_list();
    // One statement: the inner SELECT locks the due rows (skipping locked ones), the
    // UPDATE stamps the lease, and the row locks are released when it commits. It stays
    // unprepared (`sql_query`): it returns `*` for whichever row type the queue has, and a
    // prepared `*` breaks when a migration adds a column (see `crate::prepared_sql`).
    // The due rows are a MATERIALIZED part, read once: as a subquery a plan may scan them
    // again per joined row and take more than the LIMIT (see the message claim).
    sql_query(format!(
        "WITH due AS MATERIALIZED (\
           SELECT account_id, id FROM {table} \
           WHERE account_id = $5 AND status IN ({pending}) AND next_attempt_at <= $3 \
             AND (locked_until IS NULL OR locked_until <= $3) \
           ORDER BY next_attempt_at \
           LIMIT $4 \
           FOR UPDATE SKIP LOCKED) \
         UPDATE {table} AS queued SET locked_until = $1, lease_token = $2 \
         FROM due \
         WHERE queued.account_id = $5 AND queued.account_id = due.account_id \
           AND queued.id = due.id \
         RETURNING queued.*"
    ))
    .bind::<Timestamptz, _>(until)
    .bind::<SqlUuid, _>(token)
    .bind::<Timestamptz, _>(now)
    .bind::<BigInt, _>(limit)
    .bind::<SqlUuid, _>(account)
    .load(conn)
}

/// Sets each of `lanes` (accounts, each with whether its claim took all it was allowed)
/// of `queue` due when the account next has something to claim: `now` when its claim was
/// full; else the earlier of its first pending row not under a live lease and the end of
/// its earliest lease, but not before `now`; no time when nothing is pending.
pub(crate) fn reschedule_lanes(
    conn: &mut PgConnection,
    queue: &LeasedQueue,
    lanes: &[(AccountId, bool)],
    now: Timestamp,
) -> Result<(), StoreError> {
    let (table, pending) = (queue.table, queue.pending_list());
    // Two reads bounded by what the account has in flight: the first pending row in due
    // order (leased rows are stepped over), and the earliest lease end (the leased-rows
    // index).
    let next_due = format!(
        "SELECT least( \
             (SELECT q.next_attempt_at FROM {table} q \
              WHERE q.account_id = $1 AND q.status IN ({pending}) \
                AND (q.locked_until IS NULL OR q.locked_until <= $2) \
              ORDER BY q.next_attempt_at LIMIT 1), \
             (SELECT min(q.locked_until) FROM {table} q \
              WHERE q.lease_token IS NOT NULL AND q.account_id = $1 \
                AND q.status IN ({pending}))) AS due"
    );
    set_lanes_due(conn, queue.lanes, &next_due, lanes, now)
}

/// Sets the lanes of `lanes_table` due as [`reschedule_lanes`] says, with `next_due` (one
/// account's next due time: `$1` the account, `$2` now, one row `due`) read for each
/// lane whose claim was not full. One read per account, each of one account's rows (one
/// shard on Citus), then one update of the lanes, which live apart from the queue's rows
/// there (crates/postgres/src/citus.rs); the claim that calls this holds the lanes' locks.
pub(crate) fn set_lanes_due(
    conn: &mut PgConnection,
    lanes_table: &str,
    next_due: &str,
    lanes: &[(AccountId, bool)],
    now: Timestamp,
) -> Result<(), StoreError> {
    #[derive(QueryableByName)]
    struct Due {
        #[diesel(sql_type = diesel::sql_types::Nullable<Timestamptz>)]
        due: Option<OffsetDateTime>,
    }
    if lanes.is_empty() {
        return Ok(());
    }
    let now = now.as_datetime();
    let mut accounts = Vec::with_capacity(lanes.len());
    let mut dues = Vec::with_capacity(lanes.len());
    for (account, full) in lanes {
        let due = if *full {
            Some(now)
        } else {
            prepared_sql(next_due.to_owned())
                .bind::<SqlUuid, _>(account.as_uuid())
                .bind::<Timestamptz, _>(now)
                .get_result::<Due>(conn)
                .map_err(store_error)?
                .due
                .map(|due| due.max(now))
        };
        accounts.push(account.as_uuid());
        dues.push(due);
    }
    // `lanes_table` is a constant of this crate, never input.
    prepared_sql(format!(
        "UPDATE {lanes_table} AS lane SET next_due_at = next.due \
         FROM unnest($1::uuid[], $2::timestamptz[]) AS next(account_id, due) \
         WHERE lane.account_id = next.account_id"
    ))
    .bind::<Array<SqlUuid>, _>(accounts)
    .bind::<Array<diesel::sql_types::Nullable<Timestamptz>>, _>(dues)
    .execute(conn)
    .map(drop)
    .map_err(store_error)
}
