//! Email templates. The full editing rules arrive with the templates endpoints; this
//! module holds what account creation needs to store the starter templates.

use crate::slug::TemplateSlug;

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
