use crate::{
    auth::Member,
    ports::{in_transaction, EventName},
    AppError, Services,
};

/// Every event name of the account with its count and latest time, from the per-name
/// totals and the increments not yet folded into them.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn event_names(services: &Services, member: &Member) -> Result<Vec<EventName>, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| Ok(tx.event_names(account)?))
}

/// Increments folded per transaction by [`fold_event_names`].
pub const FOLD_BATCH: u32 = 10_000;

/// Folds up to `limit` recorded event-name increments into the per-name totals (one
/// transaction), so reading the names stays a few rows per name. Returns how many were
/// folded; fewer than `limit` means none are left.
///
/// # Errors
/// [`AppError`] when the store fails; nothing is folded then.
pub fn fold_event_names(services: &Services, limit: u32) -> Result<u64, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.fold_event_name_increments(limit)?)
    })
}
