use mailroom_domain::AccountId;

use crate::{
    auth::require_member,
    ports::{in_transaction, EventName},
    Actor, AppError, Services,
};

/// Every event name of the account with its count and latest time.
///
/// # Errors
/// [`AppError::Unauthorized`] for a non-member.
pub fn event_names(
    services: &Services,
    actor: &Actor,
    account: AccountId,
) -> Result<Vec<EventName>, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        Ok(tx.event_names(account)?)
    })
}
