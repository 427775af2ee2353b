use mailroom_domain::AccountId;

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// How many templates the account holds (the `/count` companion of the list).
///
/// # Errors
/// [`AppError::Unauthorized`] when the caller is not a member.
pub fn count_templates(
    services: &Services,
    actor: &Actor,
    account: AccountId,
) -> Result<u64, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        Ok(tx.count_templates(account)?)
    })
}
