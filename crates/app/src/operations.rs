//! Operator-facing reads that are not part of the API: the database side of `/metrics`.

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
