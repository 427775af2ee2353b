//! Mail servers: the SMTP connections an account sends through, and the rules for their
//! settings. The credential check against the live server is an adapter's job.

use std::net::IpAddr;

use crate::{
    email::EmailAddress, patch::Field, secret::SecretString, MailServerId, Timestamp,
    ValidationErrors,
};

/// The longest service type and default sender name.
pub const MAX_SHORT_TEXT: usize = 200;

/// A mail server host: a DNS name or an IP literal (IPv6 without brackets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailHost(String);

/// Why a host was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be a host name or an IP address")]
pub struct InvalidHost;

impl MailHost {
    /// Accepts an IP literal (IPv6 may be bracketed) or a DNS name of letters, digits and
    /// hyphens in dot-separated labels of 1–63 characters, 253 at most.
    ///
    /// # Errors
    /// [`InvalidHost`].
    pub fn parse(text: &str) -> Result<Self, InvalidHost> {
        let unbracketed = text
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .unwrap_or(text);
        if unbracketed.parse::<IpAddr>().is_ok() {
            return Ok(Self(unbracketed.to_owned()));
        }
        let name = text.strip_suffix('.').unwrap_or(text);
        let valid = !name.is_empty()
            && name.len() <= 253
            && name.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            });
        if valid {
            Ok(Self(name.to_ascii_lowercase()))
        } else {
            Err(InvalidHost)
        }
    }

    /// The host.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A mail server's settings, checked, with the password in clear (it is sealed before
/// storage and never read back through the API).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailServerSettings {
    /// Provider preset the server was configured from.
    pub service_type: String,
    /// SMTP host.
    pub host: MailHost,
    /// SMTP port (any; the TLS mode does not follow from it).
    pub port: u16,
    /// Implicit TLS from the first byte.
    pub secure: bool,
    /// Require a STARTTLS upgrade on a plaintext connection.
    pub require_tls: bool,
    /// Skip certificate verification.
    pub allow_insecure_tls: bool,
    /// SMTP username.
    pub user: String,
    /// SMTP password.
    pub password: SecretString,
    /// Sender address for templates without their own.
    pub default_from_email: EmailAddress,
    /// Display name paired with `default_from_email`.
    pub default_from_name: String,
}

/// A mail server body as received.
#[derive(Debug, Clone, Default)]
pub struct MailServerInput {
    /// `serviceType`.
    pub service_type: Field<String>,
    /// `host`.
    pub host: Field<String>,
    /// `port`.
    pub port: Field<i64>,
    /// `secure`.
    pub secure: Field<bool>,
    /// `requireTLS`.
    pub require_tls: Field<bool>,
    /// `allowInsecureTLS`.
    pub allow_insecure_tls: Field<bool>,
    /// `user`.
    pub user: Field<String>,
    /// `password`.
    pub password: Field<String>,
    /// `defaultFromEmail`.
    pub default_from_email: Field<String>,
    /// `defaultFromName`.
    pub default_from_name: Field<String>,
}

fn short_text(
    name: &str,
    value: String,
    allow_empty: bool,
    errors: &mut ValidationErrors,
) -> Option<String> {
    if !allow_empty && value.trim().is_empty() {
        errors.push(name, "must not be empty");
        return None;
    }
    if value.chars().count() > MAX_SHORT_TEXT {
        errors.push(name, format!("must be at most {MAX_SHORT_TEXT} characters"));
        return None;
    }
    Some(value)
}

impl MailServerInput {
    /// Parses a complete body (create and update alike: there is no partial update).
    /// `user`, `password` and `defaultFromName` may be empty strings (relays without
    /// AUTH, senders without a display name) but must be present.
    ///
    /// # Errors
    /// Every problem, each under its field.
    pub fn parse(self) -> Result<MailServerSettings, ValidationErrors> {
        let mut errors = ValidationErrors::new();
        let service_type = self
            .service_type
            .required("serviceType", &mut errors)
            .and_then(|v| short_text("serviceType", v, false, &mut errors));
        let host = self
            .host
            .required("host", &mut errors)
            .and_then(|v| errors.collect("host", MailHost::parse(&v)));
        let port = self.port.required("port", &mut errors).and_then(|port| {
            let valid = u16::try_from(port).ok().filter(|p| *p >= 1);
            if valid.is_none() {
                errors.push("port", "must be a whole number from 1 to 65535");
            }
            valid
        });
        let secure = self.secure.required("secure", &mut errors);
        let require_tls = self.require_tls.required("requireTLS", &mut errors);
        let allow_insecure_tls = self
            .allow_insecure_tls
            .not_null("allowInsecureTLS", &mut errors)
            .unwrap_or(false);
        let user = self
            .user
            .required("user", &mut errors)
            .and_then(|v| short_text("user", v, true, &mut errors));
        let password = self
            .password
            .required("password", &mut errors)
            .and_then(|v| {
                if v.len() > 1024 {
                    errors.push("password", "must be at most 1024 characters");
                    return None;
                }
                Some(SecretString::new(v))
            });
        let default_from_email = self
            .default_from_email
            .required("defaultFromEmail", &mut errors)
            .and_then(|v| errors.collect("defaultFromEmail", EmailAddress::parse(&v)));
        let default_from_name = self
            .default_from_name
            .required("defaultFromName", &mut errors)
            .and_then(|v| short_text("defaultFromName", v, true, &mut errors));
        errors.into_result()?;
        match (
            service_type,
            host,
            port,
            secure,
            require_tls,
            user,
            password,
            default_from_email,
            default_from_name,
        ) {
            (
                Some(service_type),
                Some(host),
                Some(port),
                Some(secure),
                Some(require_tls),
                Some(user),
                Some(password),
                Some(default_from_email),
                Some(default_from_name),
            ) => Ok(MailServerSettings {
                service_type,
                host,
                port,
                secure,
                require_tls,
                allow_insecure_tls,
                user,
                password,
                default_from_email,
                default_from_name,
            }),
            _ => Err(ValidationErrors::single("body", "is incomplete")),
        }
    }
}

/// A stored mail server as the API shows it (the password never leaves storage).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailServer {
    /// Id.
    pub id: MailServerId,
    /// Provider preset.
    pub service_type: String,
    /// SMTP host.
    pub host: MailHost,
    /// SMTP port.
    pub port: u16,
    /// Implicit TLS.
    pub secure: bool,
    /// STARTTLS required.
    pub require_tls: bool,
    /// Certificate verification skipped.
    pub allow_insecure_tls: bool,
    /// SMTP username.
    pub user: String,
    /// Default sender address.
    pub default_from_email: String,
    /// Default sender name.
    pub default_from_name: String,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
    /// Set while the server refuses Mailroom itself (see [`Unhealthy`]); `None` is
    /// healthy.
    pub unhealthy: Option<Unhealthy>,
}

/// Why a mail server is unhealthy: it refused Mailroom itself (wrong credentials, a
/// refused session), so its messages wait. Set by delivery; cleared by the next message
/// the server takes and by every save of its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhealthy {
    /// The first refusal of the current spell.
    pub since: Timestamp,
    /// The latest refusal, as the server worded it.
    pub last_error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete() -> MailServerInput {
        MailServerInput {
            service_type: Field::Value("smtp".into()),
            host: Field::Value("smtp.example.com".into()),
            port: Field::Value(587),
            secure: Field::Value(false),
            require_tls: Field::Value(true),
            allow_insecure_tls: Field::Absent,
            user: Field::Value("mailer".into()),
            password: Field::Value("pw".into()),
            default_from_email: Field::Value("hello@example.com".into()),
            default_from_name: Field::Value("Example".into()),
        }
    }

    #[test]
    fn complete_bodies_parse_and_missing_fields_are_named() {
        let settings = complete().parse().expect("valid");
        assert_eq!(settings.port, 587);
        assert!(!settings.allow_insecure_tls);
        let errors = MailServerInput::default().parse().expect_err("empty");
        let fields: Vec<_> = errors.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "serviceType",
                "host",
                "port",
                "secure",
                "requireTLS",
                "user",
                "password",
                "defaultFromEmail",
                "defaultFromName"
            ]
        );
    }

    #[test]
    fn hosts_ports_and_senders_are_checked() {
        for (host, ok) in [
            ("smtp.example.com", true),
            ("10.0.0.1", true),
            ("[::1]", true),
            ("::1", true),
            ("bad host", false),
            ("-x.com", false),
            ("", false),
        ] {
            assert_eq!(MailHost::parse(host).is_ok(), ok, "{host}");
        }
        for port in [0, -1, 65536] {
            let input = MailServerInput {
                port: Field::Value(port),
                ..complete()
            };
            assert!(input.parse().is_err(), "{port}");
        }
        let input = MailServerInput {
            default_from_email: Field::Value("nope".into()),
            ..complete()
        };
        assert!(input.parse().is_err());
    }
}
