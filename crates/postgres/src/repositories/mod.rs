//! Repository implementations, one module per resource, all on [`PgUnitOfWork`].

mod accounts;
mod announcements;
mod automations;
mod console;
mod contact_import;
pub(crate) mod contacts;
mod feedback;
mod feedback_sources;
mod forms;
mod mail_servers;
mod messages;
mod queue_stats;
mod saved_segments;
mod sealed_secrets;
pub(crate) mod segments;
mod sending_domains;
mod starter;
mod suppressions;
mod templates;
mod tokens;
mod topics;
mod tracking;
mod users;
mod webhook_events;

use diesel::pg::PgConnection;
use mailroom_app::{ports::UnitOfWork, StoreError};
use mailroom_domain::Timestamp;
use time::OffsetDateTime;

/// One open transaction; every repository trait is implemented on it.
pub struct PgUnitOfWork<'c> {
    conn: &'c mut PgConnection,
    /// The database is a Citus coordinator: a statement whose one-statement form Citus
    /// would run as several steps sent to every node takes a form of routed statements
    /// instead (the event, `contacts.rs`).
    on_citus: bool,
}

impl<'c> PgUnitOfWork<'c> {
    pub(crate) fn new(conn: &'c mut PgConnection, on_citus: bool) -> Self {
        Self { conn, on_citus }
    }
}

impl UnitOfWork for PgUnitOfWork<'_> {}

diesel::define_sql_function!(
    /// PostgreSQL's `lower(text)`, which the indexes on addresses are built on.
    fn lower(x: diesel::sql_types::Text) -> diesel::sql_types::Text
);

/// A LIKE pattern (default escape character `\`) matching any text that contains
/// `needle` literally: `\`, `%` and `_` are escaped. `lower()` leaves those three alone,
/// so the pattern may be lowered in SQL like the other string operands. The contact
/// list's email filter and the segments' `contains` share it.
pub(crate) fn contains_pattern(needle: &str) -> String {
    let mut pattern = String::with_capacity(needle.len() + 2);
    pattern.push('%');
    for c in needle.chars() {
        if matches!(c, '\\' | '%' | '_') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

fn timestamp(at: OffsetDateTime) -> Timestamp {
    Timestamp::from_datetime(at)
}

fn corrupt(what: &str, error: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {error}"))
}

/// What `EXPLAIN` returns, one row a line (for the functions that show tests a plan).
#[derive(diesel::QueryableByName)]
struct PlanLine {
    #[diesel(sql_type = diesel::sql_types::Text, column_name = "QUERY PLAN")]
    line: String,
}
