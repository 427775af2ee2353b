use mailroom_domain::{paging::PageRequest, template::Template, AccountId};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// One page of the account's templates, oldest first.
///
/// # Errors
/// [`AppError::Unauthorized`] when the caller is not a member.
pub fn list_templates(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    page: PageRequest,
) -> Result<Vec<Template>, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        Ok(tx.list_templates(account, page)?)
    })
}
