//! Mailroom's SMTP adapter (lettre over rustls with the `ring` provider).
//!
//! [`SmtpMailer`] implements the `Mailer` port: it sends the message outbox's emails over
//! a pool of live connections per mail server ([`SmtpPoolSettings`]).
//! [`SmtpProbe`] implements the `MailServerProbe` port: it checks a mail server's
//! connection settings and credentials before they are saved. [`resolve_pinned`] is the
//! egress guard's front door for every outbound SMTP connection; both resolve through
//! the shared [`mailroom_dns::DnsResolver`] the server hands them (`with_resolver`).
//!
//! # Why addresses are pinned
//!
//! Mail-server hosts come from API callers, so a connection must never reach loopback,
//! the private network or a cloud metadata service (docs/design.md#11-egress-guard). Checking the name and
//! then letting the SMTP client resolve it again would be a time-of-check/time-of-use gap:
//! a DNS answer with a short TTL can be public for the check and `127.0.0.1` for the
//! connection (DNS rebinding). So the host is resolved exactly once, **every** address is
//! checked with [`mailroom_domain::egress::check_addresses`], and the connection goes to
//! that checked [`std::net::SocketAddr`]. TLS still verifies the certificate against the
//! host *name* the caller gave, not the address.

mod body;
mod bounded;
mod dkim;
mod implicit_tls;
pub mod inbound;
mod mailer;
mod pool;
mod probe;
mod resolve;

pub use bounded::{MAX_LINE_BYTES, MAX_REPLY_BYTES};
pub use dkim::{RsaDkimKeys, DKIM_KEY_BITS, SIGNED_HEADERS};
pub use mailer::{MailerSettings, SmtpMailer};
pub use pool::SmtpPoolSettings;

pub use probe::{ProbeSettings, SmtpProbe, DEFAULT_TIMEOUT, PROBE_DEADLINE};
pub use resolve::{resolve_pinned, resolve_pinned_async};
