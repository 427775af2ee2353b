use mailroom_domain::{template::Template, TemplateId};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Deletes a template and returns it. Refused while an automation sends it or a form
/// confirms with it (naming them), so neither is left pointing at nothing.
///
/// # Errors
/// [`AppError::Invalid`] while in use; [`AppError::NotFound`] for an unknown template;
/// [`AppError`] when the store fails.
pub fn delete_template(
    services: &Services,
    member: &Member,
    id: TemplateId,
) -> Result<Template, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let template = tx.find_template(account, id)?.ok_or(AppError::NotFound)?;
        let users = tx.automations_sending(account, id)?;
        if !users.is_empty() {
            return Err(AppError::BadRequest(format!(
                "the template is used by automations ({}); change or delete them first",
                users.join(", ")
            )));
        }
        let forms = tx.forms_confirming_with(account, id)?;
        if !forms.is_empty() {
            return Err(AppError::BadRequest(format!(
                "the template is the confirmation mail of forms ({}); change or delete them \
                 first",
                forms.join(", ")
            )));
        }
        tx.delete_template(account, id)?;
        Ok(template)
    })
}
