use mailroom_domain::{
    template::{Template, TemplateInput},
    TemplateId,
};

use super::{check_preferred_server, check_template_syntax, slug_taken};
use crate::{auth::Member, ports::in_transaction, AppError, Services};

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
        patch.apply(&mut template, now);
        check_template_syntax(&template)?;
        check_preferred_server(tx, account, &template)?;
        tx.update_template(account, &template).map_err(slug_taken)?;
        Ok(template)
    })
}
