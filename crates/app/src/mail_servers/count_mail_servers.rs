use mailroom_domain::AccountId;

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// How many mail servers the account holds.
///
/// # Errors
/// [`AppError::Unauthorized`] for a non-member.
pub fn count_mail_servers(
    services: &Services,
    actor: &Actor,
    account: AccountId,
) -> Result<u64, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        Ok(tx.count_mail_servers(account)?)
    })
}
