use mailroom_domain::{
    template::{Template, TemplateInput},
    TemplateId,
};

use super::{check_preferred_server, check_template_syntax, normalise_content, slug_taken};
use crate::{auth::Member, domains::check_sender, ports::in_transaction, AppError, Services};

/// Creates a template. `name`, `slug`, `subject` and `content` are required; the slug must
/// be unused in the account; every rendered field must compile. A visual-editor
/// template's HTML is stored normalised.
///
/// # Errors
/// [`AppError::Invalid`] naming each bad field.
pub fn create_template(
    services: &Services,
    member: &Member,
    input: TemplateInput,
) -> Result<Template, AppError> {
    let account = member.account();
    let mut template = input.parse_new()?.into_template(
        TemplateId::from_uuid(services.ids.next_uuid()),
        services.clock.now(),
    );
    normalise_content(&mut template)?;
    check_template_syntax(&template)?;
    in_transaction(services.db.as_ref(), |tx| {
        check_preferred_server(tx, account, &template)?;
        if let Some(from_email) = &template.from_email {
            check_sender(tx, account, "fromEmail", from_email)?;
        }
        tx.insert_template(account, &template).map_err(slug_taken)?;
        Ok(template)
    })
}
