use mailroom_domain::{template::Template, TemplateId};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One template of the account.
///
/// # Errors
/// [`AppError::NotFound`]
/// when the template is unknown or another account's.
pub fn get_template(
    services: &Services,
    member: &Member,
    template: TemplateId,
) -> Result<Template, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        tx.find_template(account, template)?
            .ok_or(AppError::NotFound)
    })
}
