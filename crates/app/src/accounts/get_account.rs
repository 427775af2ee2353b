use mailroom_domain::{account::Account, AccountId};

use super::load_account;
use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// The account with its webhook configuration (the HTTP layer masks the secrets).
///
/// # Errors
/// [`AppError::Unauthorized`] when the caller is not a member or the account is unknown.
pub fn get_account(
    services: &Services,
    actor: &Actor,
    account: AccountId,
) -> Result<Account, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        let record = tx.find_account(account)?.ok_or(AppError::Unauthorized)?;
        load_account(tx, services.secrets.as_ref(), record)
    })
}
