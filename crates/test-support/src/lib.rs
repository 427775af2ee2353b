//! Test harness shared by every crate's tests (a dev-dependency only).
//!
//! - [`TestDatabase`]: a fresh PostgreSQL database per test, cloned from a template that
//!   was migrated once per migration set, dropped when the test ends.
//! - [`TestClock`]: the `Clock` port with a hand that tests can move forward.
//! - [`TestSmtpServer`]: a real SMTP server on loopback (AUTH, STARTTLS, implicit TLS,
//!   scripted refusals) that records what it receives.
//! - [`TestWebhookReceiver`]: a real HTTP/1.1 server on loopback that records webhook
//!   deliveries and answers from a script (statuses, redirects, delays, hangs, closes).
//! - [`TestDnsServer`]: a real DNS server on loopback (UDP, hickory's message types)
//!   over a zone the test edits, for `MAILROOM_DNS_SERVER`.
//! - [`loopback_mail`]: a message for the `Mailer` port to a server on loopback.
//! - [`stop_spare_node`]: the Citus spare node stopped, and started again, mid-test.

mod citus_node;
mod clock;
mod database;
mod dns_server;
mod hostile_smtp;
mod outgoing_mail;
mod smtp_server;
mod webhook_receiver;

pub use citus_node::{stop_spare_node, StoppedNode};
pub use clock::TestClock;
pub use database::{
    admin_url, assertion_connection, citus_workers, host_and_port, on_citus,
    register_citus_workers, RowUpdates, TestDatabase,
};
pub use dns_server::TestDnsServer;
pub use hostile_smtp::{HostileSmtpServer, Hostility};
pub use outgoing_mail::loopback_mail;
pub use smtp_server::{ReceivedMessage, TestSmtpOptions, TestSmtpServer, TlsMode};
pub use webhook_receiver::{ReceivedRequest, ReceiverReply, TestWebhookReceiver};
