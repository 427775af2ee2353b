//! JSON shapes of mail servers, and their conversion from domain values. Field
//! names follow the API specification (camelCase, `_id`).

use mailroom_domain::{patch::Field, Timestamp};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

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
    /// On create and update: whether the check sent the username and password over an
    /// unencrypted connection (the server offered no STARTTLS and `requireTLS` is off);
    /// every send will do the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials_sent_in_clear: Option<bool>,
    /// Whether delivery can use the server (docs/api-decisions.md, "Mail server
    /// health").
    pub health: MailServerHealthDto,
}

/// A mail server's health: `unhealthy` while it refuses Mailroom itself (for example
/// AUTH answered 535), with when that started and its latest refusal.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MailServerHealthDto {
    /// `healthy` or `unhealthy`.
    pub status: &'static str,
    /// The first refusal of the current spell; `null` when healthy.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub since: Option<Timestamp>,
    /// The latest refusal; `null` when healthy.
    pub last_error: Option<String>,
}

impl MailServerHealthDto {
    fn of(unhealthy: Option<mailroom_domain::mail_server::Unhealthy>) -> Self {
        match unhealthy {
            Some(unhealthy) => Self {
                status: "unhealthy",
                since: Some(unhealthy.since),
                last_error: Some(unhealthy.last_error),
            },
            None => Self {
                status: "healthy",
                since: None,
                last_error: None,
            },
        }
    }
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
            credentials_sent_in_clear: None,
            health: MailServerHealthDto::of(server.unhealthy),
        }
    }

    /// The create/update form: password `""`, warnings included.
    pub fn saved(saved: mailroom_app::mail_servers::SavedMailServer) -> Self {
        Self {
            password: String::new(),
            warnings: Some(saved.warnings),
            credentials_sent_in_clear: Some(saved.credentials_sent_in_clear),
            ..Self::read(saved.server)
        }
    }
}
