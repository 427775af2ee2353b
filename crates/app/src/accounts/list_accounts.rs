use mailroom_domain::account::Account;

use super::load_account;
use crate::{ports::in_transaction, Actor, AppError, Services};

/// Every account the caller belongs to and its token may reach (its pins), oldest first.
///
/// # Errors
/// [`AppError::Unavailable`] when the store is down.
pub fn list_accounts(services: &Services, actor: &Actor) -> Result<Vec<Account>, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        let records = tx.list_accounts_of(actor.user_id)?;
        records
            .into_iter()
            .filter(|record| actor.may_reach(record.id))
            .map(|record| load_account(tx, services.secrets.as_ref(), record))
            .collect()
    })
}
