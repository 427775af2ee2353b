//! Messages: the transactional send, the message log, the daily stats, and the steps of
//! the delivery worker (docs/design.md#8-delivery).
//!
//! Every email is a row of the outbox, written in the transaction of whatever caused it;
//! the worker claims due rows under a lease, renders and sends them with no transaction
//! open, and records each outcome in a short transaction of its own (see [`claim`], [`prepare`] and [`deliver`]).

mod cancel_message;
pub mod claim;
pub(crate) mod claim_batch;
pub mod deliver;
mod get_message;
mod lane;
mod list_messages;
mod message_stats;
pub(crate) mod outbox;
pub mod prepare;
mod send_limit;
mod send_message;
mod settings;

pub use cancel_message::{cancel_message, MessageToCancel};
pub use claim::{claim_messages, renew_message_leases, ClaimRequest, ClaimedMessages, RenderJob};
pub use deliver::{
    record_message_outcome, record_message_outcomes, send_claimed_message, MessageJob, SendOutcome,
};
pub use get_message::get_message;
pub use lane::Lane;
pub use list_messages::{count_messages, list_messages};
pub use message_stats::message_stats;
pub use prepare::{
    finish_rendered, prepare_messages, render_in_process, PreparedMessages, RenderOutcome,
};
pub use send_message::{send_transactional, TransactionalSend, IDEMPOTENCY_WINDOW};
pub use settings::DeliverySettings;

use mailroom_domain::{message::StatsCounter, AccountId, Timestamp};

use crate::{ports::UnitOfWork, StoreError};

/// Counts one `counter` event for the account on the UTC day of `at`, in the caller's
/// transaction, so the count commits exactly when the change it counts does.
pub(crate) fn count(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    at: Timestamp,
    counter: StatsCounter,
) -> Result<(), StoreError> {
    tx.add_to_stats(account, at.as_datetime().date(), counter, 1)
}
