//! Email templates.

use mailroom_domain::{MailServerId, TemplateId, Timestamp};
use serde::{Deserialize, Serialize};

use super::Patch;

/// A template. Optional fields are `None` while unset.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Template {
    /// The template's id.
    #[serde(rename = "_id")]
    pub id: TemplateId,
    /// Its name.
    pub name: String,
    /// The slug a send names it by.
    pub slug: String,
    /// The subject (a minijinja template).
    pub subject: String,
    /// The HTML body (a minijinja template).
    pub content: String,
    /// `html` or `wysiwyg`.
    pub content_type: String,
    /// The plain-text body.
    #[serde(default)]
    pub text_content: Option<String>,
    /// The sender's name.
    #[serde(default)]
    pub from_name: Option<String>,
    /// The sender's address.
    #[serde(default)]
    pub from_email: Option<String>,
    /// Copy to.
    #[serde(default)]
    pub cc: Option<String>,
    /// Blind copy to.
    #[serde(default)]
    pub bcc: Option<String>,
    /// The recipient's display name.
    #[serde(default)]
    pub rcpt_name: Option<String>,
    /// The mail server it prefers.
    #[serde(default)]
    pub preferred_email_server: Option<MailServerId>,
    /// Reply-To.
    #[serde(default)]
    pub reply_to: Option<String>,
    /// Overrides the account's click tracking.
    #[serde(default)]
    pub click_tracking: Option<bool>,
    /// Overrides the account's open tracking.
    #[serde(default)]
    pub open_tracking: Option<bool>,
    /// When it was created.
    pub create_date: Timestamp,
    /// When it last changed.
    pub update_date: Timestamp,
}

/// The body of `create_template`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewTemplate {
    /// Its name (required).
    pub name: String,
    /// Its slug, `[a-z0-9-_]` (required).
    pub slug: String,
    /// The subject (required).
    pub subject: String,
    /// The HTML body (required).
    pub content: String,
    /// The content type (the server's default when `None`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// The plain-text body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text_content: Option<String>,
    /// The sender's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_name: Option<String>,
    /// The sender's address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_email: Option<String>,
    /// Copy to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cc: Option<String>,
    /// Blind copy to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bcc: Option<String>,
    /// The recipient's display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rcpt_name: Option<String>,
    /// The mail server to prefer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preferred_email_server: Option<MailServerId>,
    /// Reply-To.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// Overrides the account's click tracking.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub click_tracking: Option<bool>,
    /// Overrides the account's open tracking.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_tracking: Option<bool>,
}

/// The body of `update_template`: [`Patch::Keep`] leaves a field, [`Patch::Clear`]
/// empties an optional one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[allow(missing_docs)] // The fields are those of `NewTemplate`.
pub struct TemplateUpdate {
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub name: Patch<String>,
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub slug: Patch<String>,
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub subject: Patch<String>,
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub content: Patch<String>,
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub content_type: Patch<String>,
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub text_content: Patch<String>,
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub from_name: Patch<String>,
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub from_email: Patch<String>,
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub cc: Patch<String>,
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub bcc: Patch<String>,
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub rcpt_name: Patch<String>,
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub preferred_email_server: Patch<MailServerId>,
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub reply_to: Patch<String>,
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub click_tracking: Patch<bool>,
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub open_tracking: Patch<bool>,
}

/// The body of `preview_template`: whom to render for and extra variables.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TemplatePreviewRequest {
    /// Render with this contact's attributes (or just this address when unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// Values for the template, as in a send.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<super::Attributes>,
}

/// A rendered template, as a send would render it (before tracking rewrites).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplatePreview {
    /// The subject.
    pub subject: String,
    /// The HTML body.
    pub html: String,
    /// The plain-text body, if any.
    #[serde(default)]
    pub text: Option<String>,
    /// The sender address.
    pub from_email: String,
    /// The sender name, if any.
    #[serde(default)]
    pub from_name: Option<String>,
    /// The recipient address.
    pub to_email: String,
    /// The recipient name, if any.
    #[serde(default)]
    pub to_name: Option<String>,
}

/// The body of `test_send_template`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TemplateTestSend {
    /// The address to send to.
    pub email: String,
    /// Values for the template, as in a send.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<super::Attributes>,
}
