use crate::{
    auth::Member,
    ports::{in_transaction, EventName},
    AppError, Services,
};

/// Every event name of the account with its count and latest time.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn event_names(services: &Services, member: &Member) -> Result<Vec<EventName>, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| Ok(tx.event_names(account)?))
}
