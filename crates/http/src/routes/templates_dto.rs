//! JSON shapes of templates, and their conversion from domain values. Field
//! names follow the API specification (camelCase, `_id`).

use mailroom_domain::{patch::Field, template::Template, Timestamp};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A template. Unset optional fields are omitted.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// Dashboard name.
    pub name: String,
    /// Unique slug.
    pub slug: String,
    /// Subject.
    pub subject: String,
    /// Sender name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_name: Option<String>,
    /// Sender address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_email: Option<String>,
    /// HTML body.
    pub content: String,
    /// Plain-text body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text_content: Option<String>,
    /// `html` or `wysiwyg`.
    pub content_type: String,
    /// Copy address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cc: Option<String>,
    /// Blind-copy address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bcc: Option<String>,
    /// Recipient display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rcpt_name: Option<String>,
    /// Mail server id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preferred_email_server: Option<String>,
    /// Reply-To.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// Click tracking; absent inherits the account default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub click_tracking: Option<bool>,
    /// Open tracking; absent inherits the account default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_tracking: Option<bool>,
    /// Creation time.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
    /// Last change.
    #[schema(value_type = String, format = DateTime)]
    pub update_date: Timestamp,
}

impl From<Template> for TemplateDto {
    fn from(t: Template) -> Self {
        Self {
            id: t.id.to_string(),
            name: t.name,
            slug: t.slug.as_str().to_owned(),
            subject: t.subject,
            from_name: t.from_name,
            from_email: t.from_email,
            content: t.content,
            text_content: t.text_content,
            content_type: t.content_type.as_str().to_owned(),
            cc: t.cc,
            bcc: t.bcc,
            rcpt_name: t.rcpt_name,
            preferred_email_server: t.preferred_mail_server.map(|id| id.to_string()),
            reply_to: t.reply_to,
            click_tracking: t.click_tracking,
            open_tracking: t.open_tracking,
            create_date: t.created_at,
            update_date: t.updated_at,
        }
    }
}

/// Body of template create and PATCH: every key in its three states (absent, null, value).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TemplateBody {
    /// Dashboard name (required on create).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub name: Field<String>,
    /// Unique slug, `[a-z0-9-_]` (required on create).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub slug: Field<String>,
    /// Subject (required on create).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub subject: Field<String>,
    /// HTML body (required on create; not nullable).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub content: Field<String>,
    /// Plain-text body (not nullable).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub text_content: Field<String>,
    /// `html` (default) or `wysiwyg`.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub content_type: Field<String>,
    /// Sender name; null clears.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub from_name: Field<String>,
    /// Sender address; null clears.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub from_email: Field<String>,
    /// Copy address (may hold variables); null clears.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub cc: Field<String>,
    /// Blind-copy address (may hold variables); null clears.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub bcc: Field<String>,
    /// Recipient display name; null clears.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub rcpt_name: Field<String>,
    /// Mail server id; null clears.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub preferred_email_server: Field<String>,
    /// Reply-To (may hold variables); null clears.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub reply_to: Field<String>,
    /// Click tracking; null inherits the account default.
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub click_tracking: Field<bool>,
    /// Open tracking; null inherits the account default.
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub open_tracking: Field<bool>,
}

impl From<TemplateBody> for mailroom_domain::template::TemplateInput {
    fn from(body: TemplateBody) -> Self {
        Self {
            name: body.name,
            slug: body.slug,
            subject: body.subject,
            content: body.content,
            text_content: body.text_content,
            content_type: body.content_type,
            from_name: body.from_name,
            from_email: body.from_email,
            cc: body.cc,
            bcc: body.bcc,
            rcpt_name: body.rcpt_name,
            reply_to: body.reply_to,
            preferred_email_server: body.preferred_email_server,
            click_tracking: body.click_tracking,
            open_tracking: body.open_tracking,
        }
    }
}

/// Body of `POST …/templates/{templateId}/preview`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PreviewBody {
    /// Render for this address: a contact of the account lends its attributes as at send
    /// time; omitted renders for `preview@example.com` with no attributes.
    pub email: Option<String>,
    /// Template variables, winning over the contact's attributes, as in a send.
    #[schema(value_type = Option<Object>)]
    pub data: Option<serde_json::Map<String, serde_json::Value>>,
}

/// A rendered preview: what a send would put in the message (before tracking rewrites).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreviewDto {
    /// Rendered subject, single-line.
    pub subject: String,
    /// Rendered HTML body.
    pub html: String,
    /// Rendered plain-text body; omitted when the template has none (or it is blank).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Sender address after the sender rule (empty with no `fromEmail` and no server).
    pub from_email: String,
    /// Sender display name; omitted when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_name: Option<String>,
    /// The recipient address rendered for.
    pub to_email: String,
    /// Recipient display name (`rcptName`); omitted when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_name: Option<String>,
}

impl From<mailroom_app::rendering::RenderedMessage> for PreviewDto {
    fn from(message: mailroom_app::rendering::RenderedMessage) -> Self {
        Self {
            subject: message.subject,
            html: message.html,
            text: message.text,
            from_email: message.from.email,
            from_name: message.from.name,
            to_email: message.to.email,
            to_name: message.to.name,
        }
    }
}

/// Body of `POST …/templates/{templateId}/test-send`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TestSendBody {
    /// The address to send the test to (required); it becomes a contact when unknown.
    pub email: Option<String>,
    /// Template variables, as in a send.
    #[schema(value_type = Option<Object>)]
    pub data: Option<serde_json::Map<String, serde_json::Value>>,
}
