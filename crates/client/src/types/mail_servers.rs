//! The SMTP servers an account sends through.

use mailroom_domain::{MailServerId, Timestamp};
use serde::{Deserialize, Serialize};

use super::Secret;

/// A mail server; the password always reads `********`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MailServer {
    /// The server's id.
    #[serde(rename = "_id")]
    pub id: MailServerId,
    /// `smtp`.
    pub service_type: String,
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: u16,
    /// Implicit TLS from the first byte.
    pub secure: bool,
    /// Refuse to send unless STARTTLS succeeds.
    #[serde(rename = "requireTLS")]
    pub require_tls: bool,
    /// Accept any certificate.
    #[serde(rename = "allowInsecureTLS")]
    pub allow_insecure_tls: bool,
    /// SMTP user.
    pub user: String,
    /// Masked.
    pub password: String,
    /// The sender address used when a template names none.
    pub default_from_email: String,
    /// The sender name used when a template names none.
    pub default_from_name: String,
    /// When it was created.
    pub create_date: Timestamp,
    /// When it last changed.
    pub update_date: Timestamp,
    /// Whether sending through it works.
    pub health: MailServerHealth,
    /// Remarks on the settings (e.g. a probe that failed).
    #[serde(default)]
    pub warnings: Option<Vec<String>>,
}

/// A mail server's health.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MailServerHealth {
    /// `healthy` or `unhealthy`.
    pub status: String,
    /// Since when.
    #[serde(default)]
    pub since: Option<Timestamp>,
    /// The error that made it unhealthy.
    #[serde(default)]
    pub last_error: Option<String>,
}

/// The body of `create_mail_server` and `update_mail_server` (which takes the whole
/// settings, as create does).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MailServerSettings {
    /// `smtp`.
    pub service_type: String,
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: u16,
    /// Implicit TLS from the first byte.
    pub secure: bool,
    /// Refuse to send unless STARTTLS succeeds.
    #[serde(rename = "requireTLS")]
    pub require_tls: bool,
    /// Accept any certificate (for test servers only).
    #[serde(rename = "allowInsecureTLS", skip_serializing_if = "Option::is_none")]
    pub allow_insecure_tls: Option<bool>,
    /// SMTP user (empty for none).
    pub user: String,
    /// SMTP password (empty for none).
    pub password: Secret,
    /// The sender address used when a template names none.
    pub default_from_email: String,
    /// The sender name used when a template names none.
    pub default_from_name: String,
}
