use mailroom_domain::{paging::PageRequest, template::Template};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One page of the account's templates, oldest first.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn list_templates(
    services: &Services,
    member: &Member,
    page: PageRequest,
) -> Result<Vec<Template>, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.list_templates(account, page)?)
    })
}
