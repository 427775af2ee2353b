//! JSON shapes of requests and responses, and their conversion from domain values.
//! Field names follow the API specification (camelCase, `_id`).

use mailroom_app::{ports::TokenRecord, tokens::IssuedToken};
use mailroom_domain::{
    account::{Account, Member},
    template::Template,
    webhook::WebhookConfig,
    Timestamp,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::extract::Maybe;

/// A page of results.
#[derive(Debug, Serialize, ToSchema)]
pub struct PageEnvelope<T: ToSchema> {
    /// The items of this page.
    pub items: Vec<T>,
    /// Offset of the first item, echoing the request.
    pub start: u64,
    /// Page size after clamping.
    pub limit: u32,
}

impl<T: ToSchema> PageEnvelope<T> {
    /// A whole, unpaged list in one envelope (tokens, accounts, members).
    pub fn whole(items: Vec<T>) -> Self {
        let limit = u32::try_from(items.len()).unwrap_or(u32::MAX);
        Self {
            items,
            start: 0,
            limit,
        }
    }

    /// One page, echoing the request after clamping.
    pub fn page(items: Vec<T>, page: mailroom_domain::paging::PageRequest) -> Self {
        Self {
            items,
            start: page.start,
            limit: page.limit,
        }
    }
}

/// The answer of every `/count` companion.
#[derive(Debug, Serialize, ToSchema)]
pub struct CountDto {
    /// How many records match.
    pub count: u64,
}

/// Body of `POST /v2/users/me/tokens`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateTokenBody {
    /// Where the token is used.
    pub name: Option<String>,
    /// 30, 60 or 90; omitted or null for a token that never expires.
    pub expires_in_days: Option<i64>,
}

/// A personal access token. `token` appears only in the creation response.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// Label.
    pub name: String,
    /// Creation time.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
    /// Expiry; null for a token that never expires.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<Timestamp>,
    /// Last use (updated at most once a minute).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_used_at: Option<Timestamp>,
    /// The raw token, shown once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

impl From<TokenRecord> for TokenDto {
    fn from(record: TokenRecord) -> Self {
        Self {
            id: record.id.to_string(),
            name: record.name,
            create_date: record.created_at,
            expires_at: record.expires_at,
            last_used_at: record.last_used_at,
            token: None,
        }
    }
}

impl From<IssuedToken> for TokenDto {
    fn from(issued: IssuedToken) -> Self {
        Self {
            token: Some(issued.raw.expose().to_owned()),
            ..Self::from(issued.record)
        }
    }
}

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

/// Body of `PATCH /v2/accounts/{accountId}`: every field optional, none nullable.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UpdateAccountBody {
    /// New name.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub name: Maybe<String>,
    /// New click-tracking default.
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub click_tracking: Maybe<bool>,
    /// New open-tracking default.
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub open_tracking: Maybe<bool>,
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
    /// Webhook configuration, null until one is set.
    pub webhooks: Option<WebhookDto>,
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
            webhooks: account
                .webhooks
                .map(|config| WebhookDto::from_config(config, SecretView::Masked)),
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
    /// At least one of contact.bounced, contact.complained, contact.deleted, contact.unsubscribed.
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
    /// `owner` or `member`.
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
