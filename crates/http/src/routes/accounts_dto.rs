//! JSON shapes of `/v2/accounts` and an account's members and webhooks, and their conversion from domain values. Field
//! names follow the API specification (camelCase, `_id`).

use mailroom_domain::{
    account::{Account, Member},
    branding::Branding,
    patch::Field,
    webhook::WebhookConfig,
    Timestamp,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Body of `POST /v2/accounts`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateAccountBody {
    /// Workspace name.
    pub name: Option<String>,
    /// Default click tracking (off).
    pub click_tracking: Option<bool>,
    /// Default open tracking (off).
    pub open_tracking: Option<bool>,
}

/// Body of `PATCH /v2/accounts/{accountId}`: every field optional; only `branding` may be
/// `null` (which clears it).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UpdateAccountBody {
    /// New name.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub name: Field<String>,
    /// New click-tracking default.
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub click_tracking: Field<bool>,
    /// New open-tracking default.
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub open_tracking: Field<bool>,
    /// Changes to the public pages' branding; `null` clears every part.
    #[serde(default)]
    #[schema(value_type = Option<BrandingBody>, nullable)]
    pub branding: Field<BrandingBody>,
    /// `true`: the account's mail servers never send a password without TLS (a server
    /// with a user needs STARTTLS, whatever its `requireTLS`).
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub refuse_clear_text_auth: Field<bool>,
}

/// `branding` in `PATCH /v2/accounts/{accountId}`: each part absent (kept), `null`
/// (cleared) or a new value.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BrandingBody {
    /// The name the unsubscribe page shows as the sender (1 to 100 characters); also the
    /// logo's alternative text.
    #[serde(default)]
    #[schema(value_type = Option<String>, nullable, max_length = 100)]
    pub display_name: Field<String>,
    /// An absolute `https://` URL of the logo (at most 2048 characters).
    #[serde(default)]
    #[schema(value_type = Option<String>, nullable, max_length = 2048)]
    pub logo_url: Field<String>,
    /// The accent colour, `#rrggbb`.
    #[serde(default)]
    #[schema(value_type = Option<String>, nullable, pattern = "^#[0-9A-Fa-f]{6}$")]
    pub accent_color: Field<String>,
}

/// The branding of an account's public pages; unset parts are `null`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BrandingDto {
    /// The name the unsubscribe page shows (the account's name when `null`).
    pub display_name: Option<String>,
    /// The logo's https URL.
    pub logo_url: Option<String>,
    /// The accent colour, `#rrggbb` in lower case.
    pub accent_color: Option<String>,
    /// The text colour the pages put on the accent colour (`#ffffff` or `#000000`,
    /// whichever contrasts more; always at least 4.5:1). Read-only.
    pub accent_text_color: Option<String>,
}

impl From<Branding> for BrandingDto {
    fn from(branding: Branding) -> Self {
        Self {
            display_name: branding.display_name.map(|name| name.as_str().to_owned()),
            logo_url: branding.logo_url.map(|url| url.as_str().to_owned()),
            accent_color: branding.accent_color.map(|colour| colour.to_hex()),
            accent_text_color: branding
                .accent_color
                .map(|colour| colour.text_color().as_css().to_owned()),
        }
    }
}

/// An account with its webhook configuration (secrets masked).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// Name.
    pub name: String,
    /// Default click tracking.
    pub click_tracking: bool,
    /// Default open tracking.
    pub open_tracking: bool,
    /// Whether the account's mail servers refuse to send a password without TLS.
    pub refuse_clear_text_auth: bool,
    /// Webhook configuration, null until one is set.
    pub webhooks: Option<WebhookDto>,
    /// The branding of the account's public pages.
    pub branding: BrandingDto,
    /// Creation time.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
}

impl From<Account> for AccountDto {
    fn from(account: Account) -> Self {
        Self {
            id: account.id.to_string(),
            name: account.name.as_str().to_owned(),
            click_tracking: account.click_tracking,
            open_tracking: account.open_tracking,
            refuse_clear_text_auth: account.refuse_clear_text_auth,
            webhooks: account
                .webhooks
                .map(|config| WebhookDto::from_config(config, SecretView::Masked)),
            branding: account.branding.into(),
            create_date: account.created_at,
        }
    }
}

/// Body of `PUT /v2/accounts/{accountId}/webhooks`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WebhookBody {
    /// `basic`, `bearer` or `none`.
    pub auth_type: Option<String>,
    /// At least one of contact.bounced, contact.complained, contact.deleted, contact.unsubscribed, contact.subscribed.
    pub events: Option<Vec<String>>,
    /// Password for basic, token for bearer. Write-only.
    pub password_or_token: Option<String>,
    /// A new signing secret (`whsec_…`) to rotate to. Write-only.
    pub signing_secret: Option<String>,
    /// HTTPS endpoint.
    pub url: Option<String>,
    /// Username for basic.
    pub username: Option<String>,
}

/// A webhook configuration.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookDto {
    /// `basic`, `bearer` or `none`.
    pub auth_type: String,
    /// Delivered event types.
    pub events: Vec<String>,
    /// `****` and the last four characters, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_or_token: Option<String>,
    /// Masked on reads; whole only in the PUT response.
    pub signing_secret: String,
    /// Endpoint.
    pub url: String,
    /// Username for basic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
}

/// Whether a response may carry the signing secret whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretView {
    /// Reads: `****` + last four.
    Masked,
    /// The PUT response only.
    SigningSecretRevealed,
}

impl WebhookDto {
    /// Shapes a configuration, masking secrets as `view` says.
    pub fn from_config(config: WebhookConfig, view: SecretView) -> Self {
        let secret = config.signing_secret.secret();
        Self {
            auth_type: config.auth_type.as_str().to_owned(),
            events: config
                .events
                .iter()
                .map(|e| e.as_str().to_owned())
                .collect(),
            password_or_token: config.password_or_token.as_ref().map(|p| p.masked_suffix()),
            signing_secret: match view {
                SecretView::Masked => secret.masked_suffix(),
                SecretView::SigningSecretRevealed => secret.expose().to_owned(),
            },
            url: config.url.as_str().to_owned(),
            username: config.username,
        }
    }
}

/// A member of an account.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberDto {
    /// The user's id.
    #[serde(rename = "_id")]
    pub id: String,
    /// The user's email.
    pub email: String,
    /// `owner`, `admin` or `member`.
    pub role: String,
    /// When the membership began.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
}

impl From<Member> for MemberDto {
    fn from(member: Member) -> Self {
        Self {
            id: member.user_id.to_string(),
            email: member.email,
            role: member.role.as_str().to_owned(),
            create_date: member.created_at,
        }
    }
}

/// Body of `POST /v2/accounts/{accountId}/members`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AddMemberBody {
    /// The user's email; a user with an unknown email is created.
    pub email: Option<String>,
    /// `admin` or `member`.
    pub role: Option<String>,
}

/// Body of `PATCH /v2/accounts/{accountId}/members/{userId}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MemberRoleBody {
    /// `admin` or `member`.
    pub role: Option<String>,
}
