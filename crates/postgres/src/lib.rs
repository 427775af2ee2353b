//! PostgreSQL adapter: implements the app crate's `Database` port and every repository with
//! diesel over an r2d2 pool, and embeds the migrations from `migrations/` at the repo root.
//!
//! SQL lives only in this crate, constraint names too. Driver errors are translated here
//! (`error.rs`): a unique violation becomes `StoreError::Duplicate` naming what the rule
//! keeps unique, an unreachable server `StoreError::Unavailable`.

pub mod citus;
mod database;
mod error;
mod listen_tls;
mod migration_script;
mod pool_health;
mod prepared_sql;
mod queue;
mod queue_wakeup;
mod repositories;
pub mod schema;
mod upkeep;

pub use database::{
    embedded_migration_names, ensure_database_exists, run_migrations, run_migrations_through,
    url_with_database, PgDatabase, PoolSettings,
};
pub use error::store_error;
pub use migration_script::statements as migration_statements;
pub use queue_wakeup::{listen_for_queued_messages, PgQueueWakeup};
pub use repositories::contacts::{
    contact_search_plan, explain_contact_search, list_contact_ids_with, ContactSearchPlan,
    FEW_MATCHES,
};
pub use repositories::segments::{
    count_plan, count_segment_with, explain_audience_batch, search_plan, search_segment_with,
    slot_plan, SegmentPlan, SlotColumn, SMALL_SET,
};
