//! JSON shapes of subscribe forms, and their conversion from domain values. Field names
//! follow the API's style (camelCase, `_id`).

use mailroom_domain::{
    form::{form_key, Form},
    patch::Field,
    AccountId, Timestamp,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Body of form create and PATCH.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FormBody {
    /// Name, 1–200 characters (required on create).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub name: Field<String>,
    /// The topics (ids of the account's topics, at most 50) a post subscribes to.
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub topic_ids: Field<Vec<String>>,
    /// The custom attribute slugs a post may set (at most 20).
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub attributes: Field<Vec<String>>,
    /// Whether a post waits for a confirmation link to be followed (default false).
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub double_opt_in: Field<bool>,
    /// The template of the confirmation mail (required with `doubleOptIn`); it gets a
    /// `confirm_url` variable. `null` clears it.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub confirmation_template_id: Field<String>,
    /// Where the browser goes after a post from the hosted page (`http(s)`); `null`
    /// clears it.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub success_redirect_url: Field<String>,
    /// Where the browser goes after a confirmation (`http(s)`); `null` clears it.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub confirmation_redirect_url: Field<String>,
}

impl From<FormBody> for mailroom_domain::form::FormInput {
    fn from(body: FormBody) -> Self {
        Self {
            name: body.name,
            topic_ids: body.topic_ids,
            attributes: body.attributes,
            double_opt_in: body.double_opt_in,
            confirmation_template_id: body.confirmation_template_id,
            success_redirect_url: body.success_redirect_url,
            confirmation_redirect_url: body.confirmation_redirect_url,
        }
    }
}

/// A subscribe form.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FormDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// The account.
    pub account_id: String,
    /// Name.
    pub name: String,
    /// The topics a post subscribes to.
    pub topic_ids: Vec<String>,
    /// The custom attribute slugs a post may set.
    pub attributes: Vec<String>,
    /// Whether a post waits for its confirmation link.
    pub double_opt_in: bool,
    /// The confirmation mail's template; omitted when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmation_template_id: Option<String>,
    /// Where the browser goes after a post; omitted when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_redirect_url: Option<String>,
    /// Where the browser goes after a confirmation; omitted when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmation_redirect_url: Option<String>,
    /// The form's public key: the path segment of its hosted page and posts,
    /// `/f/{formKey}`.
    pub form_key: String,
    /// Creation time.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
    /// Last change.
    #[schema(value_type = String, format = DateTime)]
    pub update_date: Timestamp,
}

impl FormDto {
    /// The form of `account` as the API shows it.
    pub fn of(account: AccountId, form: Form) -> Self {
        let settings = form.settings;
        Self {
            id: form.id.to_string(),
            account_id: account.to_string(),
            name: settings.name,
            topic_ids: settings.topic_ids.iter().map(ToString::to_string).collect(),
            attributes: settings.attributes,
            double_opt_in: settings.double_opt_in,
            confirmation_template_id: settings.confirmation_template_id.map(|id| id.to_string()),
            success_redirect_url: settings
                .success_redirect_url
                .map(|url| url.as_str().to_owned()),
            confirmation_redirect_url: settings
                .confirmation_redirect_url
                .map(|url| url.as_str().to_owned()),
            form_key: form_key(account, form.id),
            create_date: form.created_at,
            update_date: form.updated_at,
        }
    }
}
