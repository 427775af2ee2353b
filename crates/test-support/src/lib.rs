//! Test harness shared by every crate's tests (a dev-dependency only).
//!
//! - [`TestDatabase`]: a fresh PostgreSQL database per test, cloned from a template that
//!   was migrated once per migration set, dropped when the test ends.
//! - [`TestClock`]: the `Clock` port with a hand that tests can move forward.

mod clock;
mod database;

pub use clock::TestClock;
pub use database::{admin_url, TestDatabase};
