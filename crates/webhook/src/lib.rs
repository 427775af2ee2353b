//! Mailroom's webhook adapter: [`HyperWebhookSender`] implements the `WebhookSender` port
//! over hyper (HTTP/1.1, rustls with the `ring` provider and the webpki roots), and
//! [`EgressUrlGuard`] implements the `WebhookUrlGuard` port that `PUT …/webhooks` runs
//! before saving a URL. [`HyperSnsClient`] implements the `SnsClient` port through the
//! same guarded connector.
//!
//! # What a delivery looks like
//!
//! `POST <url>` with `Content-Type: application/json`, the body the app built
//! (`{"type","timestamp","data"}`), the Standard Webhooks headers `webhook-id`,
//! `webhook-timestamp` and `webhook-signature` (signed with
//! [`mailroom_domain::webhook_signature::sign`]), and `Authorization: Basic …`/`Bearer …`
//! when the configuration says so. The whole exchange (resolution, connection, TLS,
//! request, response head and the first bytes of the body) is bounded by one timeout,
//! 15 s in production. Redirects are never followed: the 3xx is handed back as the answer.
//!
//! # Why addresses are pinned
//!
//! Webhook URLs come from API callers, so a delivery must never reach loopback, the
//! private network or a cloud metadata service (docs/design.md#11-egress-guard). The connector resolves the
//! host exactly once per connection, checks **every** address with
//! [`mailroom_domain::egress::check_addresses`], and connects to the checked address; TLS
//! still verifies the certificate against the host *name*. A connection kept in the pool
//! was checked when it was opened, so reusing it never reaches an unchecked address.

mod connector;
mod guard;
mod sender;
mod sns;

pub use guard::EgressUrlGuard;
pub use sender::{HyperWebhookSender, SenderSettings, DEFAULT_TIMEOUT};
pub use sns::{HyperSnsClient, SNS_TIMEOUT};
