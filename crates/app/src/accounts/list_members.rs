use mailroom_domain::{account::Member, AccountId};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// Every member of the account.
///
/// # Errors
/// [`AppError::Unauthorized`] when the caller is not a member.
pub fn list_members(
    services: &Services,
    actor: &Actor,
    account: AccountId,
) -> Result<Vec<Member>, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        Ok(tx.list_members(account)?)
    })
}
