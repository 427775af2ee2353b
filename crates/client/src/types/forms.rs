//! Subscribe forms: an account's public sign-up forms, optionally with double opt-in.

use mailroom_domain::{AccountId, FormId, TemplateId, Timestamp, TopicId};
use serde::{Deserialize, Serialize};

use super::Patch;

/// A subscribe form.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Form {
    /// The form's id.
    #[serde(rename = "_id")]
    pub id: FormId,
    /// Its account.
    pub account_id: AccountId,
    /// Its name.
    pub name: String,
    /// The topics a post subscribes to.
    pub topic_ids: Vec<TopicId>,
    /// The custom attribute slugs a post may set.
    pub attributes: Vec<String>,
    /// Whether a post waits for its confirmation link.
    pub double_opt_in: bool,
    /// The confirmation mail's template.
    #[serde(default)]
    pub confirmation_template_id: Option<TemplateId>,
    /// Where the browser goes after a post from the hosted page.
    #[serde(default)]
    pub success_redirect_url: Option<String>,
    /// Where the browser goes after a confirmation.
    #[serde(default)]
    pub confirmation_redirect_url: Option<String>,
    /// The public key of its hosted page, `/f/{formKey}`.
    pub form_key: String,
    /// When it was created.
    pub create_date: Timestamp,
    /// When it last changed.
    pub update_date: Timestamp,
}

/// The body of `create_form`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewForm {
    /// Its name (required).
    pub name: String,
    /// The topics a post subscribes to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub topic_ids: Vec<TopicId>,
    /// The custom attribute slugs a post may set (at most 20).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<String>,
    /// Whether a post waits for its confirmation link (then a template is required).
    pub double_opt_in: bool,
    /// The confirmation mail's template; it gets a `confirm_url` variable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmation_template_id: Option<TemplateId>,
    /// Where the browser goes after a post from the hosted page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_redirect_url: Option<String>,
    /// Where the browser goes after a confirmation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmation_redirect_url: Option<String>,
}

/// The body of `update_form`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FormUpdate {
    /// A new name.
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub name: Patch<String>,
    /// New topics.
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub topic_ids: Patch<Vec<TopicId>>,
    /// New attribute slugs.
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub attributes: Patch<Vec<String>>,
    /// Double opt-in on or off.
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub double_opt_in: Patch<bool>,
    /// A new confirmation template, or [`Patch::Clear`].
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub confirmation_template_id: Patch<TemplateId>,
    /// A new success redirect, or [`Patch::Clear`].
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub success_redirect_url: Patch<String>,
    /// A new confirmation redirect, or [`Patch::Clear`].
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub confirmation_redirect_url: Patch<String>,
}

/// The answer to a JSON post to a form, the same whatever the address.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FormPostAnswer {
    /// `pending_confirmation` (a confirmation mail is on its way) or `subscribed`.
    pub status: String,
}
