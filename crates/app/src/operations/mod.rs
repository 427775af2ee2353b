//! Operator-facing work that is not part of the API: the database side of `/metrics`,
//! and re-sealing stored secrets under a new key.

mod rotate_secrets;

pub use rotate_secrets::{rotate_secrets, ColumnRotation, RotationSummary};

use crate::{
    ports::{in_transaction, QueueStats},
    AppError, Services,
};

/// The outboxes' depth and lag and the messages by status, now.
///
/// # Errors
/// [`AppError`] when the store fails or is unreachable.
pub fn queue_stats(services: &Services) -> Result<QueueStats, AppError> {
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| Ok(tx.queue_stats(now)?))
}
