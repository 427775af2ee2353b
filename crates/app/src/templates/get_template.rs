use mailroom_domain::{template::Template, AccountId, TemplateId};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// One template of the account.
///
/// # Errors
/// [`AppError::Unauthorized`] when the caller is not a member; [`AppError::NotFound`]
/// when the template is unknown or another account's.
pub fn get_template(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    template: TemplateId,
) -> Result<Template, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        tx.find_template(account, template)?
            .ok_or(AppError::NotFound)
    })
}
