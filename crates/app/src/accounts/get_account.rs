use mailroom_domain::account::Account;

use super::load_account;
use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// The account with its webhook configuration (the HTTP layer masks the secrets).
///
/// # Errors
/// [`AppError::Unauthorized`] when the account is unknown.
pub fn get_account(services: &Services, member: &Member) -> Result<Account, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let record = tx.find_account(account)?.ok_or(AppError::Unauthorized)?;
        load_account(tx, services.secrets.as_ref(), record)
    })
}
