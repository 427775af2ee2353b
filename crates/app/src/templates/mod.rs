//! Templates: list, count, get, create, update, delete, preview and test sends.

mod count_templates;
mod create_template;
mod delete_template;
mod editor_html;
mod get_template;
mod list_templates;
mod preview_slots;
mod preview_template;
mod test_send;
mod text_part;
mod update_template;

pub use count_templates::count_templates;
pub use create_template::create_template;
pub use delete_template::delete_template;
pub use editor_html::{check_nesting, normalise_editor_html, MAX_NESTING};
pub use get_template::get_template;
pub use list_templates::list_templates;
pub use preview_slots::{
    AccountSlots, PreviewSlot, PreviewSlots, MAX_IMPORTS_PER_ACCOUNT, MAX_PREVIEWS_PER_ACCOUNT,
};
pub use preview_template::{preview_draft, preview_template, PreviewRequest, PREVIEW_ADDRESS};
pub use test_send::test_send;
pub use text_part::{fill_text_part, text_from_html};
pub use update_template::update_template;

use mailroom_domain::{
    template::{ContentType, Template},
    AccountId, ValidationErrors,
};

use crate::{ports::UnitOfWork, rendering::check_syntax, AppError, Duplicate, StoreError};

/// A visual-editor template's HTML is stored normalised ([`normalise_editor_html`]);
/// other templates' HTML is stored as written.
fn normalise_content(template: &mut Template) -> Result<(), AppError> {
    if template.content_type == ContentType::Wysiwyg {
        template.content = normalise_editor_html(&template.content)
            .map_err(|refusal| AppError::invalid("content", refusal))?;
    }
    Ok(())
}

/// Every field that is rendered at send time must compile now, so a broken template is
/// refused when it is saved rather than failing every send.
fn check_template_syntax(template: &Template) -> Result<(), AppError> {
    let mut errors = ValidationErrors::new();
    let fields: [(&'static str, Option<&str>); 8] = [
        ("subject", Some(&template.subject)),
        ("content", Some(&template.content)),
        ("textContent", template.text_content.as_deref()),
        ("fromName", template.from_name.as_deref()),
        ("rcptName", template.rcpt_name.as_deref()),
        ("cc", template.cc.as_deref()),
        ("bcc", template.bcc.as_deref()),
        ("replyTo", template.reply_to.as_deref()),
    ];
    for (field, source) in fields {
        if let Some(Err(error)) = source.map(|source| check_syntax(field, source)) {
            errors.push(field, error.to_string());
        }
    }
    errors.into_result().map_err(AppError::Invalid)
}

/// The preferred mail server must be one of the account's.
fn check_preferred_server(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    template: &Template,
) -> Result<(), AppError> {
    if let Some(server) = template.preferred_mail_server {
        if tx.find_mail_server(account, server)?.is_none() {
            return Err(AppError::invalid(
                "preferredEmailServer",
                "must be the id of a mail server of this account",
            ));
        }
    }
    Ok(())
}

/// Translates the slug's unique violation into the client's mistake it is.
fn slug_taken(error: StoreError) -> AppError {
    match error {
        StoreError::Duplicate(Duplicate::TemplateSlug) => AppError::invalid(
            "slug",
            "is already used by another template of this account",
        ),
        other => other.into(),
    }
}
