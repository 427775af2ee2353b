//! Test harness shared by every crate's tests (a dev-dependency only).
//!
//! - [`TestDatabase`]: a fresh PostgreSQL database per test, cloned from a template that
//!   was migrated once per migration set, dropped when the test ends.
//! - [`TestClock`]: the `Clock` port with a hand that tests can move forward.
//! - [`TestSmtpServer`]: a real SMTP server on loopback (AUTH, STARTTLS, implicit TLS,
//!   scripted refusals) that records what it receives.

mod clock;
mod database;
mod smtp_server;

pub use clock::TestClock;
pub use database::{admin_url, TestDatabase};
pub use smtp_server::{ReceivedMessage, TestSmtpOptions, TestSmtpServer, TlsMode};
