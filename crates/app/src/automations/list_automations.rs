use mailroom_domain::{automation::Automation, paging::PageRequest, template::Template, AccountId};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// One page of the account's automations, oldest first, each with the template it sends.
///
/// # Errors
/// [`AppError::Unauthorized`] for a non-member.
pub fn list_automations(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    page: PageRequest,
) -> Result<Vec<(Automation, Option<Template>)>, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        Ok(tx.list_automations(account, page)?)
    })
}

/// How many automations the account holds.
///
/// # Errors
/// [`AppError::Unauthorized`] for a non-member.
pub fn count_automations(
    services: &Services,
    actor: &Actor,
    account: AccountId,
) -> Result<u64, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        Ok(tx.count_automations(account)?)
    })
}
