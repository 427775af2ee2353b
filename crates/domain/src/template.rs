//! Email templates. The full editing rules arrive with the templates endpoints; this
//! module holds what account creation needs to store the starter templates.

use crate::{slug::TemplateSlug, MailServerId, TemplateId, Timestamp};

/// How the dashboard editor treats a template's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentType {
    /// Raw HTML.
    Html,
    /// The visual editor.
    Wysiwyg,
}

impl ContentType {
    /// The wire and stored name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Html => "html",
            Self::Wysiwyg => "wysiwyg",
        }
    }
}

/// A template to be stored, with the fields every template must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTemplate {
    /// Dashboard name.
    pub name: String,
    /// Unique slug within the account.
    pub slug: TemplateSlug,
    /// Subject line (may hold variables).
    pub subject: String,
    /// HTML body.
    pub content: String,
    /// Plain-text body.
    pub text_content: Option<String>,
    /// Editor mode.
    pub content_type: ContentType,
}

/// A stored template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// Id.
    pub id: TemplateId,
    /// Dashboard name.
    pub name: String,
    /// Unique slug within the account.
    pub slug: TemplateSlug,
    /// Subject line (may hold variables).
    pub subject: String,
    /// HTML body.
    pub content: String,
    /// Plain-text body.
    pub text_content: Option<String>,
    /// Editor mode.
    pub content_type: ContentType,
    /// Sender display name; see the sender pairing rule.
    pub from_name: Option<String>,
    /// Sender address; when unset the mail server's default pair applies.
    pub from_email: Option<String>,
    /// Copy address (may hold variables).
    pub cc: Option<String>,
    /// Blind-copy address (may hold variables).
    pub bcc: Option<String>,
    /// Recipient display name (may hold variables).
    pub rcpt_name: Option<String>,
    /// Reply-To address (may hold variables).
    pub reply_to: Option<String>,
    /// The mail server that carries this template's sends.
    pub preferred_mail_server: Option<MailServerId>,
    /// Click tracking; `None` inherits the account default.
    pub click_tracking: Option<bool>,
    /// Open tracking; `None` inherits the account default.
    pub open_tracking: Option<bool>,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
}

impl ContentType {
    /// Reads the wire and stored name.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "html" => Some(Self::Html),
            "wysiwyg" => Some(Self::Wysiwyg),
            _ => None,
        }
    }
}
