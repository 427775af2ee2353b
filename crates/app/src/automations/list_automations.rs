use mailroom_domain::{automation::Automation, paging::PageRequest, template::Template};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One page of the account's automations, oldest first, each with the template it sends.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn list_automations(
    services: &Services,
    member: &Member,
    page: PageRequest,
) -> Result<Vec<(Automation, Option<Template>)>, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.list_automations(account, page)?)
    })
}

/// How many automations the account holds.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn count_automations(services: &Services, member: &Member) -> Result<u64, AppError> {
    let account = member.account();
    in_transaction(
        services.db.as_ref(),
        |tx| Ok(tx.count_automations(account)?),
    )
}
