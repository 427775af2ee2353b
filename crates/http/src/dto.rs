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

use mailroom_domain::patch::Field;

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
    pub name: Field<String>,
    /// New click-tracking default.
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub click_tracking: Field<bool>,
    /// New open-tracking default.
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub open_tracking: Field<bool>,
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

/// Body of mail server create and PATCH: the complete object, password included.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MailServerBody {
    /// Provider preset.
    #[serde(default)]
    #[schema(value_type = String)]
    pub service_type: Field<String>,
    /// SMTP host.
    #[serde(default)]
    #[schema(value_type = String)]
    pub host: Field<String>,
    /// SMTP port.
    #[serde(default)]
    #[schema(value_type = i64)]
    pub port: Field<i64>,
    /// Implicit TLS.
    #[serde(default)]
    #[schema(value_type = bool)]
    pub secure: Field<bool>,
    /// Require STARTTLS.
    #[serde(default, rename = "requireTLS")]
    #[schema(value_type = bool)]
    pub require_tls: Field<bool>,
    /// Skip certificate verification.
    #[serde(default, rename = "allowInsecureTLS")]
    #[schema(value_type = Option<bool>)]
    pub allow_insecure_tls: Field<bool>,
    /// SMTP username.
    #[serde(default)]
    #[schema(value_type = String)]
    pub user: Field<String>,
    /// SMTP password (write-only).
    #[serde(default)]
    #[schema(value_type = String)]
    pub password: Field<String>,
    /// Default sender address.
    #[serde(default)]
    #[schema(value_type = String)]
    pub default_from_email: Field<String>,
    /// Default sender name.
    #[serde(default)]
    #[schema(value_type = String)]
    pub default_from_name: Field<String>,
}

impl From<MailServerBody> for mailroom_domain::mail_server::MailServerInput {
    fn from(body: MailServerBody) -> Self {
        Self {
            service_type: body.service_type,
            host: body.host,
            port: body.port,
            secure: body.secure,
            require_tls: body.require_tls,
            allow_insecure_tls: body.allow_insecure_tls,
            user: body.user,
            password: body.password,
            default_from_email: body.default_from_email,
            default_from_name: body.default_from_name,
        }
    }
}

/// Reads mask the password as `********`; create and update answer `""`.
pub const MASKED_PASSWORD: &str = "********";

/// A mail server; the password is never shown.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MailServerDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// Provider preset.
    pub service_type: String,
    /// SMTP host.
    pub host: String,
    /// SMTP port.
    pub port: u16,
    /// Implicit TLS.
    pub secure: bool,
    /// Require STARTTLS.
    #[serde(rename = "requireTLS")]
    pub require_tls: bool,
    /// Skip certificate verification.
    #[serde(rename = "allowInsecureTLS")]
    pub allow_insecure_tls: bool,
    /// SMTP username.
    pub user: String,
    /// `********` on reads, `""` in create and update responses.
    pub password: String,
    /// Default sender address.
    pub default_from_email: String,
    /// Default sender name.
    pub default_from_name: String,
    /// Creation time.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
    /// Last change.
    #[schema(value_type = String, format = DateTime)]
    pub update_date: Timestamp,
    /// On create and update: what the check could not establish (for example a relay
    /// without AUTH).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
}

impl MailServerDto {
    /// The read form (password masked).
    pub fn read(server: mailroom_domain::mail_server::MailServer) -> Self {
        Self {
            id: server.id.to_string(),
            service_type: server.service_type,
            host: server.host.as_str().to_owned(),
            port: server.port,
            secure: server.secure,
            require_tls: server.require_tls,
            allow_insecure_tls: server.allow_insecure_tls,
            user: server.user,
            password: MASKED_PASSWORD.to_owned(),
            default_from_email: server.default_from_email,
            default_from_name: server.default_from_name,
            create_date: server.created_at,
            update_date: server.updated_at,
            warnings: None,
        }
    }

    /// The create/update form: password `""`, warnings included.
    pub fn saved(saved: mailroom_app::mail_servers::SavedMailServer) -> Self {
        Self {
            password: String::new(),
            warnings: Some(saved.warnings),
            ..Self::read(saved.server)
        }
    }
}

/// Body of topic create and PATCH.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TopicBody {
    /// Name (required on create).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub name: Field<String>,
    /// Description; null clears.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub description: Field<String>,
}

impl From<TopicBody> for mailroom_domain::topic::TopicInput {
    fn from(body: TopicBody) -> Self {
        Self {
            name: body.name,
            description: body.description,
        }
    }
}

/// An announcement topic.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// Name.
    pub name: String,
    /// Description, omitted when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Creation time.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
}

impl From<mailroom_domain::topic::Topic> for TopicDto {
    fn from(topic: mailroom_domain::topic::Topic) -> Self {
        Self {
            id: topic.id.to_string(),
            name: topic.name,
            description: topic.description,
            create_date: topic.created_at,
        }
    }
}

/// Resolved attributes as JSON: `{slug: value}` (dates as RFC 3339 with milliseconds).
fn attributes_json(
    attributes: mailroom_domain::attribute::ResolvedAttributes,
) -> serde_json::Map<String, serde_json::Value> {
    attributes
        .into_iter()
        .map(|(slug, value)| (slug, value.to_json()))
        .collect()
}

/// A contact. Flags are present only while set.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContactDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// Email.
    pub email: String,
    /// Creation time.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
    /// Present while the contact carries the hard-bounce flag.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub hard_bounced: Option<Timestamp>,
    /// When the contact complained.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub complaint_date: Option<Timestamp>,
    /// When the contact unsubscribed from everything.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub unsubscribe_date: Option<Timestamp>,
    /// Topics the contact unsubscribed from.
    pub topic_unsubscriptions: Vec<String>,
    /// Resolved attributes (`{slug: value}`): in search results, upserts and single reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub attributes: Option<serde_json::Map<String, serde_json::Value>>,
}

impl ContactDto {
    /// A contact without attributes (the list).
    pub fn plain(contact: mailroom_domain::contact::Contact) -> Self {
        Self {
            id: contact.id.to_string(),
            email: contact.email,
            create_date: contact.created_at,
            hard_bounced: contact.hard_bounced_at,
            complaint_date: contact.complaint_at,
            unsubscribe_date: contact.unsubscribed_at,
            topic_unsubscriptions: contact
                .topic_unsubscriptions
                .iter()
                .map(ToString::to_string)
                .collect(),
            attributes: None,
        }
    }

    /// A contact with its resolved attributes.
    pub fn with_attributes(
        contact: mailroom_domain::contact::Contact,
        attributes: mailroom_domain::attribute::ResolvedAttributes,
    ) -> Self {
        Self {
            attributes: Some(attributes_json(attributes)),
            ..Self::plain(contact)
        }
    }
}

/// Body of `POST …/contacts` (create or merge).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UpsertContactBody {
    /// Email (matched case-insensitively).
    pub email: Option<String>,
    /// Custom attributes to merge: string, number, boolean or RFC 3339 date values.
    #[schema(value_type = Option<Object>)]
    pub attributes: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Body of `PATCH …/contacts/{contactId}`: exactly `{"hardBounced": false}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UnbounceBody {
    /// Must be `false`.
    #[serde(default)]
    #[schema(value_type = bool)]
    pub hard_bounced: Field<bool>,
}

/// Body of `POST …/events`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EventBody {
    /// The contact's email (created when unknown).
    pub email: Option<String>,
    /// Event name; normalised to snake_case.
    pub slug: Option<String>,
    /// Custom attributes to merge into the contact.
    #[schema(value_type = Option<Object>)]
    pub attributes: Option<serde_json::Map<String, serde_json::Value>>,
}

/// A recorded contact event.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContactEventDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// Account.
    pub account_id: String,
    /// Contact.
    pub contact_id: String,
    /// Normalised slug.
    pub slug: String,
    /// When it was recorded.
    #[schema(value_type = String, format = DateTime)]
    pub timestamp: Timestamp,
}

impl ContactEventDto {
    /// Shapes a recorded event of `account`.
    pub fn new(
        account: mailroom_domain::AccountId,
        event: mailroom_app::ports::ContactEvent,
    ) -> Self {
        Self {
            id: event.id.to_string(),
            account_id: account.to_string(),
            contact_id: event.contact_id.to_string(),
            slug: event.slug.as_str().to_owned(),
            timestamp: event.occurred_at,
        }
    }
}

/// An event name with its count and latest time.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventNameDto {
    /// Slug.
    pub slug: String,
    /// How many events.
    pub count: u64,
    /// The latest.
    #[schema(value_type = String, format = DateTime)]
    pub last_seen: Timestamp,
}

/// An attribute meta.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttributeMetaDto {
    /// Slug.
    pub slug: String,
    /// `string`, `number`, `boolean` or `date`.
    #[serde(rename = "type")]
    pub attribute_type: String,
    /// `system`, `custom` or `event`.
    pub source: String,
}

/// One attribute condition.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConditionBody {
    /// Attribute slug.
    pub slug: String,
    /// Operator (see the specification's table).
    pub operator: String,
    /// Operand; its type is dictated by the operator.
    #[schema(value_type = Option<Object>)]
    pub value: Option<serde_json::Value>,
}

/// Body of `POST …/contacts/search` and its `/count`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SearchBody {
    /// Conditions combined with AND.
    pub attributes: Option<Vec<ConditionBody>>,
    /// Whether unsubscribed contacts are included (required).
    pub include_unsubscribed: Option<bool>,
    /// Exclude contacts unsubscribed from this topic.
    pub topic_id: Option<String>,
}

/// Query parameters of the contact list (besides `start` and `limit`).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
pub struct ContactListParams {
    /// `createDate`, `email`, `messageCount`, `name` (default) or `status`.
    pub sort_by: Option<String>,
    /// `1` ascending (default) or `-1` descending.
    pub order: Option<String>,
    /// Case-insensitive email substring.
    pub search: Option<String>,
    /// Exact case-insensitive email; takes precedence over `search`.
    pub email: Option<String>,
    /// `bounced` or `unsubscribed`.
    pub status: Option<String>,
}

/// Where a webhook event was (or will be) delivered; secrets only as their last four
/// characters.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookTargetDto {
    /// Endpoint.
    pub url: String,
    /// `basic`, `bearer` or `none`.
    pub auth_type: String,
    /// Last four characters of the signing secret.
    pub signing_secret_suffix: String,
    /// Username for basic, omitted otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// Last four characters of the password or token, omitted when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_or_token_suffix: Option<String>,
}

/// A webhook event: one queued or attempted delivery. Optional fields are omitted while
/// unset.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookEventDto {
    /// Id (also the `webhook-id` header of its deliveries).
    #[serde(rename = "_id")]
    pub id: String,
    /// Account.
    pub account_id: String,
    /// `contact.bounced`, `contact.complained`, `contact.deleted` or `contact.unsubscribed`.
    pub event: String,
    /// `queued`, `retrying`, `delivered` or `failed`.
    pub status: String,
    /// The delivered `data`.
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
    /// Target of the latest attempt.
    pub target: WebhookTargetDto,
    /// Attempts made.
    pub try_count: u32,
    /// When it was queued.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
    /// The event this one re-queues.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_event_id: Option<String>,
    /// Who asked for the retry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retried_by_user_id: Option<String>,
    /// When the next attempt is due (queued and retrying only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub next_attempt_at: Option<Timestamp>,
    /// When the latest attempt was made.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_attempt_at: Option<Timestamp>,
    /// HTTP status of the latest attempt, when the endpoint answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_status_code: Option<u16>,
    /// Why the latest attempt failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When it was delivered.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub delivered_at: Option<Timestamp>,
}

impl From<mailroom_domain::webhook_event::WebhookEvent> for WebhookEventDto {
    fn from(event: mailroom_domain::webhook_event::WebhookEvent) -> Self {
        let target = event.target;
        Self {
            id: event.id.to_string(),
            account_id: event.account_id.to_string(),
            event: event.event_type.as_str().to_owned(),
            status: event.status.as_str().to_owned(),
            payload: event.payload,
            target: WebhookTargetDto {
                url: target.url,
                auth_type: target.auth_type.as_str().to_owned(),
                signing_secret_suffix: target.signing_secret_suffix,
                username: target.username,
                password_or_token_suffix: target.password_or_token_suffix,
            },
            try_count: event.try_count,
            create_date: event.created_at,
            parent_event_id: event.parent_event_id.map(|id| id.to_string()),
            retried_by_user_id: event.retried_by_user_id.map(|id| id.to_string()),
            next_attempt_at: event.next_attempt_at,
            last_attempt_at: event.last_attempt_at,
            last_status_code: event.last_status_code,
            last_error: event.last_error,
            delivered_at: event.delivered_at,
        }
    }
}

/// Query parameters of the webhook event list and its count (besides `start` and `limit`).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
pub struct WebhookEventListParams {
    /// `queued`, `retrying`, `delivered` or `failed`.
    pub status: Option<String>,
    /// A webhook event type, e.g. `contact.bounced`.
    pub event: Option<String>,
}

/// Body of `POST …/messages` (a transactional send).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SendMessageBody {
    /// The template's slug.
    pub slug: Option<String>,
    /// The recipient; the contact is created when unknown.
    pub email: Option<String>,
    /// Template variables, winning over the contact's attributes.
    #[schema(value_type = Option<Object>)]
    pub data: Option<serde_json::Map<String, serde_json::Value>>,
}

/// One message of the outbox. Optional fields are omitted while unset.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// Account.
    pub account_id: String,
    /// Recipient contact.
    pub contact_id: String,
    /// Recipient address when queued.
    pub email: String,
    /// Template sent.
    pub template_id: String,
    /// `transactional`, `automation` or `announcement`.
    pub kind: String,
    /// `queued`, `sending`, `sent`, `failed`, `bounced` or `skipped`.
    pub status: String,
    /// Why it was skipped: `bounce_blocked`, `complaint_blocked`, `unsubscribed`,
    /// `free_limit_capped`, `no_mail_server` or `automation_disabled`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    /// The automation that queued it (automation messages only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub automation_id: Option<String>,
    /// The announcement that queued it (announcement messages only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub announcement_id: Option<String>,
    /// Template variables of the send.
    #[schema(value_type = Object)]
    pub data: serde_json::Map<String, serde_json::Value>,
    /// Delivery attempts made.
    pub attempts: u32,
    /// The last SMTP reply or connection fault.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_reply: Option<String>,
    /// The `Message-ID` header, stable over retries.
    pub message_id: String,
    /// When the next attempt is due (queued only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub next_attempt_at: Option<Timestamp>,
    /// When it was queued.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
    /// When its state last changed.
    #[schema(value_type = String, format = DateTime)]
    pub update_date: Timestamp,
    /// When the mail server accepted it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub sent_at: Option<Timestamp>,
    /// When it was first opened (open tracking); on `GET …/messages/{messageId}` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub opened_at: Option<Timestamp>,
    /// When a tracked link in it was first clicked; on `GET …/messages/{messageId}` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub clicked_at: Option<Timestamp>,
}

impl From<mailroom_domain::message::Message> for MessageDto {
    fn from(message: mailroom_domain::message::Message) -> Self {
        Self {
            id: message.id.to_string(),
            account_id: message.account_id.to_string(),
            contact_id: message.contact_id.to_string(),
            email: message.email,
            template_id: message.template_id.to_string(),
            kind: message.kind.as_str().to_owned(),
            status: message.status.as_str().to_owned(),
            skip_reason: message.skip_reason.map(|r| r.as_str().to_owned()),
            automation_id: message.automation_id.map(|id| id.to_string()),
            announcement_id: message.announcement_id.map(|id| id.to_string()),
            data: message.data,
            attempts: message.attempts,
            last_reply: message.last_reply,
            message_id: message.message_id_header,
            next_attempt_at: message.next_attempt_at,
            create_date: message.created_at,
            update_date: message.updated_at,
            sent_at: message.sent_at,
            opened_at: None,
            clicked_at: None,
        }
    }
}

/// Query parameters of the message log and its count (besides `start` and `limit`).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
pub struct MessageListParams {
    /// `queued`, `sending`, `sent`, `failed`, `bounced` or `skipped`.
    pub status: Option<String>,
    /// Only messages to this contact.
    pub contact_id: Option<String>,
}

/// One UTC day of message counters.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DailyStatsDto {
    /// The start of the UTC day the counters cover, `2026-11-24T00:00:00.000Z`.
    #[schema(value_type = String, format = DateTime)]
    pub day: Timestamp,
    /// Skipped because the contact hard-bounced.
    pub bounce_blocked: u64,
    /// Complaints received.
    pub complained: u64,
    /// Skipped because the contact complained.
    pub complaint_blocked: u64,
    /// Skipped because of the monthly send limit.
    pub free_limit_capped: u64,
    /// Hard bounces.
    pub bounced: u64,
    /// First clicks.
    pub clicked: u64,
    /// Failed messages.
    pub failed: u64,
    /// First opens.
    pub opened: u64,
    /// Sent messages.
    pub sent: u64,
    /// Unsubscriptions.
    pub unsubscribed: u64,
}

impl From<mailroom_domain::message::DailyStats> for DailyStatsDto {
    fn from(stats: mailroom_domain::message::DailyStats) -> Self {
        use mailroom_domain::message::StatsCounter as C;
        Self {
            day: Timestamp::from_datetime(stats.day.midnight().assume_utc()),
            bounce_blocked: stats.get(C::BounceBlocked),
            complained: stats.get(C::Complained),
            complaint_blocked: stats.get(C::ComplaintBlocked),
            free_limit_capped: stats.get(C::FreeLimitCapped),
            bounced: stats.get(C::Bounced),
            clicked: stats.get(C::Clicked),
            failed: stats.get(C::Failed),
            opened: stats.get(C::Opened),
            sent: stats.get(C::Sent),
            unsubscribed: stats.get(C::Unsubscribed),
        }
    }
}
