//! Repository implementations, one module per resource, all on [`PgUnitOfWork`].

mod accounts;
mod announcements;
mod automations;
mod console;
mod contact_import;
pub(crate) mod contacts;
mod feedback;
mod feedback_sources;
mod mail_servers;
mod messages;
mod queue_stats;
mod sealed_secrets;
pub(crate) mod segments;
mod sending_domains;
mod starter;
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
}

impl<'c> PgUnitOfWork<'c> {
    pub(crate) fn new(conn: &'c mut PgConnection) -> Self {
        Self { conn }
    }
}

impl UnitOfWork for PgUnitOfWork<'_> {}

fn timestamp(at: OffsetDateTime) -> Timestamp {
    Timestamp::from_datetime(at)
}

fn corrupt(what: &str, error: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {error}"))
}
