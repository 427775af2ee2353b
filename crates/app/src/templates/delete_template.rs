use mailroom_domain::{template::Template, AccountId, TemplateId};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// Deletes a template and returns it. Refused while an automation sends it (naming the
/// automations), so no automation is left pointing at nothing.
///
/// # Errors
/// [`AppError::Invalid`] while in use; [`AppError::NotFound`] for an unknown template;
/// [`AppError::Unauthorized`] for a non-member.
pub fn delete_template(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    id: TemplateId,
) -> Result<Template, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        let template = tx.find_template(account, id)?.ok_or(AppError::NotFound)?;
        let users = tx.automations_sending(account, id)?;
        if !users.is_empty() {
            return Err(AppError::BadRequest(format!(
                "the template is used by automations ({}); change or delete them first",
                users.join(", ")
            )));
        }
        tx.delete_template(account, id)?;
        Ok(template)
    })
}
