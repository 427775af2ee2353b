//! Webhook events: the outbox written beside contact changes, the list and retry use
//! cases, and the steps of the delivery worker.
//!
//! Delivery is three steps so that no network call happens inside a transaction: a short
//! transaction claims due events under a lease ([`claim_webhook_deliveries`]); the sender
//! delivers them with no transaction open ([`send_webhook_delivery`], async); a second
//! short transaction records each attempt, but only for events whose lease the worker
//! still holds ([`record_webhook_attempts`]). The server's worker loop runs the three.

mod deliver;
mod get_webhook_event;
mod list_webhook_events;
mod queue_webhook_event;
mod retry_webhook_event;

pub use deliver::{
    claim_webhook_deliveries, record_webhook_attempts, send_webhook_delivery, AccountRoom,
    AttemptReport, ClaimedBatch, ClaimedDelivery, DeliveryRound, DeliverySettings, LANES_PER_CLAIM,
};
pub use get_webhook_event::get_webhook_event;
pub use list_webhook_events::{count_webhook_events, list_webhook_events};
pub use queue_webhook_event::queue_webhook_event;
pub use retry_webhook_event::retry_webhook_event;

use mailroom_domain::{webhook::WebhookConfig, AccountId};

use crate::{accounts::open_webhook_config, ports::UnitOfWork, AppError, Services};

/// The account's webhook configuration with its secrets opened, if it has one.
fn load_config(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    account: AccountId,
) -> Result<Option<WebhookConfig>, AppError> {
    tx.find_webhook_config(account)?
        .map(|stored| open_webhook_config(services.secrets.as_ref(), account, stored))
        .transpose()
}
