use mailroom_domain::{
    template::{Template, TemplateInput},
    TemplateId,
};

use super::{check_preferred_server, check_template_syntax, normalise_content, slug_taken};
use crate::{auth::Member, domains::check_sender, ports::in_transaction, AppError, Services};

/// Applies a partial update (the specification's eight PATCH rules live in
/// [`TemplateInput::parse_patch`]). Sends that reference the template use the new content
/// at once, since they read the stored row at send time.
///
/// # Errors
/// [`AppError::Invalid`] naming each bad field (an empty body included);
/// [`AppError::NotFound`] for an unknown template.
pub fn update_template(
    services: &Services,
    member: &Member,
    id: TemplateId,
    input: TemplateInput,
) -> Result<Template, AppError> {
    let account = member.account();
    let patch = input.parse_patch()?;
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| {
        let mut template = tx.find_template(account, id)?.ok_or(AppError::NotFound)?;
        let stored_from_email = template.from_email.clone();
        patch.apply(&mut template, now);
        normalise_content(&mut template)?;
        check_template_syntax(&template)?;
        check_preferred_server(tx, account, &template)?;
        // Only a new sender is held to the sender rule: a template saved before its
        // account verified a domain stays editable.
        if let Some(from_email) = &template.from_email {
            if template.from_email != stored_from_email {
                check_sender(tx, account, "fromEmail", from_email)?;
            }
        }
        tx.update_template(account, &template).map_err(slug_taken)?;
        Ok(template)
    })
}
