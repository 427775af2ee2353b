//! The schema on a Citus cluster: after the migrations, `run_migrations` on a database
//! with the `citus` extension distributes every table that is not distributed yet.
//!
//! Every table is one of three kinds, and a table the lists below do not place is an
//! error (the schema test runs this on a cluster, so a new table must be placed):
//! - **account-owned**: a table with an `account_id` column, distributed by it, all in
//!   one co-location group with `accounts` (distributed by `id`), so an account's rows of
//!   every table live on one node and its statements route to one shard;
//! - **reference**: [`REFERENCE_TABLES`], copied to every node (read before the account is
//!   known, small, rarely written);
//! - **local**: [`LOCAL_TABLES`], kept on the coordinator only.
//!
//! The conversion is idempotent and runs on an empty database as on one with data
//! (`create_distributed_table` moves existing rows into the shards). Citus distributes a
//! table only when no foreign key ties it to a table that is not distributed yet, so the
//! foreign keys among the tables still to convert are dropped first and added back after,
//! under the same names and definitions; those from a local table to a distributed one,
//! which Citus refuses, are dropped for good ([`LOCAL_TABLES`] says why that is safe).
//! The whole conversion is one transaction: a failure leaves the schema as it was.
//! docs/operations.md ("Running on Citus") is the operator's guide.

use diesel::{
    connection::SimpleConnection,
    pg::PgConnection,
    sql_query,
    sql_types::{Bool, Text},
    QueryableByName, RunQueryDsl,
};
use mailroom_app::StoreError;

use crate::store_error;

/// Copied to every node: authentication reads them before any account is known.
pub const REFERENCE_TABLES: &[&str] =
    &["users", "tokens", "console_sessions", "console_login_links"];

/// Kept on the coordinator. Diesel's bookkeeping; the lanes, one small row per
/// account with work waiting, which every worker's claim locks with `FOR UPDATE SKIP
/// LOCKED` across accounts (a statement Citus runs on one node only); and the monthly
/// sends, keyed by the accounts' owner, whose total over an owner's accounts the claim
/// reads in one statement (by account, it would read every shard). A lane names an
/// account without a foreign key on Citus: a lane left by a deleted account is claimed
/// once, finds nothing and is cleared.
pub const LOCAL_TABLES: &[&str] = &[
    "__diesel_schema_migrations",
    "delivery_lanes",
    "webhook_lanes",
    "monthly_sends",
];

/// The tenant table, distributed by its `id`.
const TENANT_TABLE: &str = "accounts";

/// Whether the database has the Citus extension.
///
/// # Errors
/// When the query fails.
pub fn is_citus(conn: &mut PgConnection) -> Result<bool, StoreError> {
    #[derive(QueryableByName)]
    struct Found {
        #[diesel(sql_type = Bool)]
        found: bool,
    }
    sql_query("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS found")
        .get_result::<Found>(conn)
        .map(|row| row.found)
        .map_err(store_error)
}

/// How each table of the schema is placed on Citus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Distributed by the named column, co-located with `accounts`.
    Distributed(&'static str),
    Reference,
    Local,
}

/// The placement of `table`, given whether it has an `account_id` column; `None` for a
/// table no rule places.
pub fn placement(table: &str, has_account_id: bool) -> Option<Placement> {
    if table == TENANT_TABLE {
        Some(Placement::Distributed("id"))
    } else if REFERENCE_TABLES.contains(&table) {
        Some(Placement::Reference)
    } else if LOCAL_TABLES.contains(&table) {
        Some(Placement::Local)
    } else if has_account_id {
        Some(Placement::Distributed("account_id"))
    } else {
        None
    }
}

#[derive(QueryableByName)]
struct TableRow {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Bool)]
    has_account_id: bool,
    #[diesel(sql_type = Bool)]
    placed: bool,
}

#[derive(QueryableByName)]
struct ForeignKey {
    #[diesel(sql_type = Text)]
    table_name: String,
    #[diesel(sql_type = Text)]
    referenced: String,
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Text)]
    definition: String,
}

/// Distributes every table of the schema that Citus does not know yet; returns the tables
/// it converted (empty when there was nothing to do). Call it on the coordinator.
///
/// # Errors
/// A table no rule places, a node that is not the coordinator, or what Citus refuses.
pub fn distribute(conn: &mut PgConnection) -> Result<Vec<String>, StoreError> {
    // Sequential: Citus refuses to touch a reference table in a transaction that already
    // used several connections to one node for a distributed table's shards, and this
    // one creates both kinds and foreign keys between them.
    conn.batch_execute("BEGIN; SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
        .map_err(store_error)?;
    match convert(conn) {
        Ok(converted) => {
            conn.batch_execute("COMMIT").map_err(store_error)?;
            Ok(converted)
        }
        Err(error) => {
            let _ = conn.batch_execute("ROLLBACK");
            Err(error)
        }
    }
}

fn convert(conn: &mut PgConnection) -> Result<Vec<String>, StoreError> {
    {
        let tables: Vec<TableRow> = sql_query(
            "SELECT c.relname::text AS name, \
                    EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid \
                            AND a.attname = 'account_id' AND NOT a.attisdropped) AS has_account_id, \
                    EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = c.oid) AS placed \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') \
             ORDER BY c.relname",
        )
        .load(conn)
        .map_err(store_error)?;

        let mut pending: Vec<(String, Placement)> = Vec::new();
        for table in &tables {
            let placement = placement(&table.name, table.has_account_id).ok_or_else(|| {
                StoreError::Other(format!(
                    "table {} has no account_id and is neither a reference nor a local table \
                     (crates/postgres/src/citus.rs): place it before running on Citus",
                    table.name
                ))
            })?;
            if !table.placed && placement != Placement::Local {
                pending.push((table.name.clone(), placement));
            }
        }
        if pending.is_empty() {
            return Ok(Vec::new());
        }

        let is_coordinator: Vec<TableRow> = sql_query(
            "SELECT ''::text AS name, false AS has_account_id, citus_is_coordinator() AS placed",
        )
        .load(conn)
        .map_err(store_error)?;
        if !is_coordinator.first().is_some_and(|row| row.placed) {
            return Err(StoreError::Other(
                "this Citus node is not the coordinator: run the migrations against the \
                 coordinator (after citus_set_coordinator_host and citus_add_node)"
                    .to_owned(),
            ));
        }

        // Foreign keys touching a table still to convert, or leaving a local table.
        let names: Vec<String> = pending.iter().map(|(name, _)| name.clone()).collect();
        let keys: Vec<ForeignKey> = sql_query(
            "SELECT conrelid::regclass::text AS table_name, confrelid::regclass::text AS referenced, \
                    conname::text AS name, pg_get_constraintdef(oid) AS definition \
             FROM pg_constraint \
             WHERE contype = 'f' AND connamespace = 'public'::regnamespace \
               AND (conrelid::regclass::text = ANY($1) OR confrelid::regclass::text = ANY($1) \
                    OR conrelid::regclass::text = ANY($2)) \
             ORDER BY 1, 3",
        )
        .bind::<diesel::sql_types::Array<Text>, _>(&names)
        .bind::<diesel::sql_types::Array<Text>, _>(
            LOCAL_TABLES.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>(),
        )
        .load(conn)
        .map_err(store_error)?;
        for key in &keys {
            conn.batch_execute(&format!(
                "ALTER TABLE {} DROP CONSTRAINT {}",
                quote(&key.table_name),
                quote(&key.name)
            ))
            .map_err(store_error)?;
        }

        // Reference tables first, then the tenant, then the account-owned tables: each
        // co-located table names the group's first table.
        let mut ordered = pending.clone();
        ordered.sort_by_key(|(name, placement)| match placement {
            Placement::Reference => 0,
            Placement::Distributed(_) if name == TENANT_TABLE => 1,
            _ => 2,
        });
        for (name, placement) in &ordered {
            let statement = match placement {
                Placement::Reference => format!("SELECT create_reference_table('{name}')"),
                Placement::Distributed(column) if name == TENANT_TABLE => {
                    format!("SELECT create_distributed_table('{name}', '{column}')")
                }
                Placement::Distributed(column) => format!(
                    "SELECT create_distributed_table('{name}', '{column}', \
                     colocate_with => '{TENANT_TABLE}')"
                ),
                Placement::Local => continue,
            };
            conn.batch_execute(&statement).map_err(store_error)?;
        }

        for key in keys
            .iter()
            .filter(|key| !LOCAL_TABLES.contains(&key.table_name.as_str()))
        {
            conn.batch_execute(&format!(
                "ALTER TABLE {} ADD CONSTRAINT {} {}",
                quote(&key.table_name),
                quote(&key.name),
                key.definition
            ))
            .map_err(|error| {
                StoreError::Other(format!(
                    "adding back {} on {} (→ {}) on Citus: {error}",
                    key.name, key.table_name, key.referenced
                ))
            })?;
        }

        // Functions the statements call must exist on every node they are sent to.
        conn.batch_execute(
            "SELECT create_distributed_function(p.oid::regprocedure) \
             FROM pg_proc p \
             WHERE p.pronamespace = 'public'::regnamespace \
               AND p.prorettype <> 'trigger'::regtype \
               AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass \
                               AND d.objid = p.oid AND d.deptype = 'e') \
               AND NOT EXISTS (SELECT 1 FROM pg_dist_object o \
                               WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid)",
        )
        .map_err(store_error)?;
        Ok(names)
    }
}

/// Runs `statement`, which on Citus reads every shard by design (work of any account, a
/// user's accounts), with Citus's multi-shard guard off. The tests on Citus turn the guard
/// into an error for every other statement (`citus.multi_task_query_log_level`), so a
/// statement that should stay on one account's shard and stops doing so fails them. On
/// plain PostgreSQL the setting is a placeholder that nothing reads.
///
/// # Errors
/// The statement's, or a failure to change the setting.
pub(crate) fn fan_out<T>(
    conn: &mut PgConnection,
    statement: impl FnOnce(&mut PgConnection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    use diesel::connection::{AnsiTransactionManager, TransactionManager};
    let in_transaction = matches!(
        AnsiTransactionManager::transaction_manager_status_mut(conn).transaction_depth(),
        Ok(Some(_))
    );
    let (off, back) = if in_transaction {
        (
            "SET LOCAL citus.multi_task_query_log_level TO 'off'",
            "SET LOCAL citus.multi_task_query_log_level TO DEFAULT",
        )
    } else {
        (
            "SET citus.multi_task_query_log_level TO 'off'",
            "RESET citus.multi_task_query_log_level",
        )
    };
    conn.batch_execute(off).map_err(store_error)?;
    let result = statement(conn);
    // After a failed statement the transaction is aborted and ends with it (a rollback
    // drops SET LOCAL); outside one, the session's setting is put back either way.
    let restored = conn.batch_execute(back).map_err(store_error);
    match result {
        Ok(value) => restored.map(|()| value),
        Err(error) => Err(error),
    }
}

fn quote(identifier: &str) -> String {
    format!("\"{}\"", identifier.replace('"', "\"\""))
}
