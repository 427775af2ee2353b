//! The account's webhook configuration: event types, authentication, signing secret.

use std::fmt;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::{secret::SecretString, ValidationErrors};

/// The lifecycle notifications a webhook can deliver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum WebhookEventType {
    /// A contact hard-bounced.
    #[serde(rename = "contact.bounced")]
    ContactBounced,
    /// A contact complained (marked mail as spam).
    #[serde(rename = "contact.complained")]
    ContactComplained,
    /// A contact was deleted.
    #[serde(rename = "contact.deleted")]
    ContactDeleted,
    /// A contact unsubscribed, wholly or from a topic.
    #[serde(rename = "contact.unsubscribed")]
    ContactUnsubscribed,
    /// A contact subscribed through a subscribe form (confirmed, with double opt-in).
    #[serde(rename = "contact.subscribed")]
    ContactSubscribed,
}

impl WebhookEventType {
    /// Every type, in a stable order.
    pub const ALL: [Self; 5] = [
        Self::ContactBounced,
        Self::ContactComplained,
        Self::ContactDeleted,
        Self::ContactUnsubscribed,
        Self::ContactSubscribed,
    ];

    /// The wire name, such as `contact.bounced`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::ContactBounced => "contact.bounced",
            Self::ContactComplained => "contact.complained",
            Self::ContactDeleted => "contact.deleted",
            Self::ContactUnsubscribed => "contact.unsubscribed",
            Self::ContactSubscribed => "contact.subscribed",
        }
    }

    /// Reads a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == text)
    }
}

/// How deliveries authenticate against the customer's endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WebhookAuthType {
    /// `Authorization: Basic` with `username` and `passwordOrToken`.
    Basic,
    /// `Authorization: Bearer` with `passwordOrToken`.
    Bearer,
    /// No `Authorization` header; the signature alone proves origin.
    None,
}

impl WebhookAuthType {
    /// The wire name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Basic => "basic",
            Self::Bearer => "bearer",
            Self::None => "none",
        }
    }

    /// Reads a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "basic" => Some(Self::Basic),
            "bearer" => Some(Self::Bearer),
            "none" => Some(Self::None),
            _ => None,
        }
    }
}

/// The prefix of every signing secret (Standard Webhooks).
pub const SIGNING_SECRET_PREFIX: &str = "whsec_";
/// How many random bytes a generated signing secret holds.
pub const SIGNING_SECRET_BYTES: usize = 32;

/// A Standard Webhooks signing secret: `whsec_` + base64 of 24 to 64 bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningSecret(SecretString);

/// Why a supplied signing secret was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be 'whsec_' followed by the base64 of 24 to 64 bytes")]
pub struct InvalidSigningSecret;

impl SigningSecret {
    /// A new secret from fresh randomness.
    pub fn from_random(random: [u8; SIGNING_SECRET_BYTES]) -> Self {
        let encoded = base64::engine::general_purpose::STANDARD.encode(random);
        Self(SecretString::new(format!(
            "{SIGNING_SECRET_PREFIX}{encoded}"
        )))
    }

    /// Checks a secret supplied by the client for rotation.
    ///
    /// # Errors
    /// [`InvalidSigningSecret`] when the prefix or the key length is wrong.
    pub fn parse(text: &str) -> Result<Self, InvalidSigningSecret> {
        let key = Self::decode(text).ok_or(InvalidSigningSecret)?;
        if !(24..=64).contains(&key.len()) {
            return Err(InvalidSigningSecret);
        }
        Ok(Self(SecretString::new(text)))
    }

    fn decode(text: &str) -> Option<Vec<u8>> {
        let encoded = text.strip_prefix(SIGNING_SECRET_PREFIX)?;
        base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
    }

    /// The key bytes the HMAC uses.
    pub fn key_bytes(&self) -> Vec<u8> {
        Self::decode(self.0.expose()).unwrap_or_default()
    }

    /// The whole secret, for the one response that returns it and for storage.
    pub fn secret(&self) -> &SecretString {
        &self.0
    }
}

impl fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningSecret([redacted])")
    }
}

/// The longest webhook URL accepted.
pub const MAX_URL_LENGTH: usize = 2048;

/// An absolute `http` or `https` URL with a host. Whether plain `http` and private hosts
/// are allowed is the egress guard's decision, made where the network is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookUrl(String);

/// Why a URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidUrl {
    /// Too long.
    #[error("must be at most 2048 characters")]
    TooLong,
    /// Not `http(s)://host…`.
    #[error("must be an absolute https URL")]
    Shape,
}

impl WebhookUrl {
    /// Checks scheme and host are present and the text has no white space.
    ///
    /// # Errors
    /// [`InvalidUrl`].
    pub fn parse(text: &str) -> Result<Self, InvalidUrl> {
        if text.len() > MAX_URL_LENGTH {
            return Err(InvalidUrl::TooLong);
        }
        let bad_char = text.chars().any(|c| c.is_whitespace() || c.is_control());
        if bad_char {
            return Err(InvalidUrl::Shape);
        }
        split_host_port(text).ok_or(InvalidUrl::Shape)?;
        Ok(Self(text.to_owned()))
    }

    /// The URL.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True for `https://` URLs.
    pub fn is_https(&self) -> bool {
        self.0.starts_with("https://")
    }

    /// The host: a DNS name, an IPv4 literal, or an IPv6 literal without its brackets.
    pub fn host(&self) -> &str {
        split_host_port(&self.0).map_or("", |(host, _)| host)
    }

    /// The port: the explicit one, else 443 for `https` and 80 for `http`.
    pub fn port(&self) -> u16 {
        split_host_port(&self.0).map_or(0, |(_, port)| port)
    }
}

/// Host and port of an `http(s)://` URL; `None` when either is missing or malformed.
fn split_host_port(text: &str) -> Option<(&str, u16)> {
    let (rest, default_port) = match text.strip_prefix("https://") {
        Some(rest) => (rest, 443),
        None => (text.strip_prefix("http://")?, 80),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let (host, port) = match host_port.strip_prefix('[') {
        Some(bracketed) => {
            let (host, after) = bracketed.split_once(']')?;
            host.parse::<std::net::Ipv6Addr>().ok()?;
            (host, after.strip_prefix(':'))
        }
        None => match host_port.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        },
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        None => default_port,
        Some(digits) => digits.parse::<u16>().ok().filter(|port| *port != 0)?,
    };
    Some((host, port))
}

/// A stored webhook configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// Where deliveries go.
    pub url: WebhookUrl,
    /// How they authenticate.
    pub auth_type: WebhookAuthType,
    /// Which event types are delivered (at least one, no duplicates).
    pub events: Vec<WebhookEventType>,
    /// Username for `basic`.
    pub username: Option<String>,
    /// Password for `basic`, token for `bearer`.
    pub password_or_token: Option<SecretString>,
    /// The signing secret.
    pub signing_secret: SigningSecret,
}

/// A configuration as submitted, before the signing secret is settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookSettings {
    /// Where deliveries go.
    pub url: WebhookUrl,
    /// How they authenticate.
    pub auth_type: WebhookAuthType,
    /// Which event types are delivered.
    pub events: Vec<WebhookEventType>,
    /// Username for `basic`.
    pub username: Option<String>,
    /// Password for `basic`, token for `bearer`.
    pub password_or_token: Option<SecretString>,
    /// A new signing secret (rotation); `None` keeps the stored one or generates one.
    pub signing_secret: Option<SigningSecret>,
}

/// The raw fields of a webhook PUT body, before validation.
#[derive(Debug, Clone, Default)]
pub struct WebhookSettingsInput<'a> {
    /// `url`.
    pub url: Option<&'a str>,
    /// `authType`.
    pub auth_type: Option<&'a str>,
    /// `events`.
    pub events: Option<Vec<&'a str>>,
    /// `username`.
    pub username: Option<&'a str>,
    /// `passwordOrToken`.
    pub password_or_token: Option<&'a str>,
    /// `signingSecret`.
    pub signing_secret: Option<&'a str>,
}

impl WebhookSettings {
    /// Validates a submitted configuration, collecting every problem.
    ///
    /// `basic` needs `username` and `passwordOrToken`; `bearer` needs `passwordOrToken`;
    /// with `none` both are ignored and not stored, so no stale credential lingers.
    ///
    /// # Errors
    /// [`ValidationErrors`] naming each bad field.
    pub fn parse(input: WebhookSettingsInput<'_>) -> Result<Self, ValidationErrors> {
        let mut errors = ValidationErrors::new();
        let url = match input.url {
            None => {
                errors.push("url", "is required");
                None
            }
            Some(url) => errors.collect("url", WebhookUrl::parse(url)),
        };
        let auth_type = match input.auth_type {
            None => {
                errors.push("authType", "is required");
                None
            }
            Some(text) => {
                let parsed = WebhookAuthType::parse(text);
                if parsed.is_none() {
                    errors.push("authType", "must be one of basic, bearer, none");
                }
                parsed
            }
        };
        let mut events = Vec::new();
        match input.events {
            None => errors.push("events", "is required"),
            Some(list) if list.is_empty() => {
                errors.push("events", "must name at least one event type")
            }
            Some(list) => {
                for name in list {
                    match WebhookEventType::parse(name) {
                        Some(t) if !events.contains(&t) => events.push(t),
                        Some(_) => {}
                        None => errors.push(
                            "events",
                            format!(
                                "unknown event type '{name}'; allowed: contact.bounced, contact.complained, contact.deleted, contact.unsubscribed, contact.subscribed"
                            ),
                        ),
                    }
                }
            }
        }
        let username = input.username.filter(|u| !u.is_empty()).map(str::to_owned);
        let password = input
            .password_or_token
            .filter(|p| !p.is_empty())
            .map(SecretString::new);
        let (username, password) = match auth_type {
            Some(WebhookAuthType::Basic) => {
                if username.is_none() {
                    errors.push("username", "is required when authType is basic");
                }
                if password.is_none() {
                    errors.push("passwordOrToken", "is required when authType is basic");
                }
                (username, password)
            }
            Some(WebhookAuthType::Bearer) => {
                if password.is_none() {
                    errors.push("passwordOrToken", "is required when authType is bearer");
                }
                (None, password)
            }
            _ => (None, None),
        };
        if username
            .as_ref()
            .is_some_and(|u| u.chars().count() > 200 || u.contains(':'))
        {
            errors.push(
                "username",
                "must be at most 200 characters and contain no ':'",
            );
        }
        if password.as_ref().is_some_and(|p| p.expose().len() > 1024) {
            errors.push("passwordOrToken", "must be at most 1024 characters");
        }
        // Any non-empty credential: the customer's endpoint decides its own. Reads of one
        // shorter than `MIN_SECRET_WITH_SUFFIX` show `****` alone (`SecretString::suffix`).
        let signing_secret = match input.signing_secret {
            None => None,
            Some(text) => errors.collect("signingSecret", SigningSecret::parse(text)),
        };
        errors.into_result()?;
        match (url, auth_type) {
            (Some(url), Some(auth_type)) => Ok(Self {
                url,
                auth_type,
                events,
                username,
                password_or_token: password,
                signing_secret,
            }),
            _ => Err(ValidationErrors::single("body", "is incomplete")),
        }
    }

    /// Settles the signing secret: a supplied one rotates, otherwise the stored one is
    /// kept, otherwise `generate` makes the first.
    pub fn into_config(
        self,
        stored: Option<SigningSecret>,
        generate: impl FnOnce() -> SigningSecret,
    ) -> WebhookConfig {
        let signing_secret = self.signing_secret.or(stored).unwrap_or_else(generate);
        WebhookConfig {
            url: self.url,
            auth_type: self.auth_type,
            events: self.events,
            username: self.username,
            password_or_token: self.password_or_token,
            signing_secret,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input<'a>() -> WebhookSettingsInput<'a> {
        WebhookSettingsInput {
            url: Some("https://hooks.example.com/mailroom"),
            auth_type: Some("none"),
            events: Some(vec!["contact.bounced"]),
            ..Default::default()
        }
    }

    #[test]
    fn generated_secrets_parse_back() {
        let secret = SigningSecret::from_random([9u8; 32]);
        assert!(secret.secret().expose().starts_with("whsec_"));
        assert_eq!(
            SigningSecret::parse(secret.secret().expose()),
            Ok(secret.clone())
        );
        assert_eq!(secret.key_bytes(), vec![9u8; 32]);
        assert!(SigningSecret::parse("whsec_short").is_err());
        assert!(SigningSecret::parse("secret").is_err());
    }

    #[test]
    fn settings_validation_collects_every_problem() {
        assert!(WebhookSettings::parse(input()).is_ok());
        let errors = WebhookSettings::parse(WebhookSettingsInput::default()).expect_err("empty");
        let fields: Vec<_> = errors.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["url", "authType", "events"]);
        let bad = WebhookSettingsInput {
            events: Some(vec![]),
            ..input()
        };
        assert!(WebhookSettings::parse(bad).is_err());
        let bad = WebhookSettingsInput {
            events: Some(vec!["contact.created"]),
            ..input()
        };
        assert!(WebhookSettings::parse(bad).is_err());
        let bad = WebhookSettingsInput {
            auth_type: Some("digest"),
            ..input()
        };
        assert!(WebhookSettings::parse(bad).is_err());
        let bad = WebhookSettingsInput {
            auth_type: Some("basic"),
            ..input()
        };
        assert_eq!(
            WebhookSettings::parse(bad).expect_err("no creds").0.len(),
            2
        );
        let bad = WebhookSettingsInput {
            url: Some("ftp://x"),
            ..input()
        };
        assert!(WebhookSettings::parse(bad).is_err());
    }

    #[test]
    fn urls_name_their_host_and_port() {
        let parts = |text: &str| {
            let url = WebhookUrl::parse(text).expect(text);
            (url.host().to_owned(), url.port())
        };
        assert_eq!(
            parts("https://hooks.example.com/x"),
            ("hooks.example.com".into(), 443)
        );
        assert_eq!(
            parts("http://127.0.0.1:8080/x?y#z"),
            ("127.0.0.1".into(), 8080)
        );
        assert_eq!(parts("https://[::1]:8443"), ("::1".into(), 8443));
        assert_eq!(
            parts("https://u:p@h.example:444/"),
            ("h.example".into(), 444)
        );
        for bad in [
            "https://",
            "https://:443/",
            "https://h.example:0/",
            "https://h.example:99999/",
            "https://h.example:x/",
            "https://[not-v6]/",
            "https://h .example/",
        ] {
            assert_eq!(WebhookUrl::parse(bad), Err(InvalidUrl::Shape), "{bad}");
        }
    }

    #[test]
    fn secret_is_rotated_kept_or_generated() {
        let stored = SigningSecret::from_random([1u8; 32]);
        let fresh = || SigningSecret::from_random([2u8; 32]);
        let kept = WebhookSettings::parse(input())
            .expect("valid")
            .into_config(Some(stored.clone()), fresh);
        assert_eq!(kept.signing_secret, stored);
        let first = WebhookSettings::parse(input())
            .expect("valid")
            .into_config(None, fresh);
        assert_eq!(first.signing_secret, fresh());
        let rotated_text = SigningSecret::from_random([3u8; 32]);
        let with_secret = WebhookSettingsInput {
            signing_secret: Some(rotated_text.secret().expose()),
            ..input()
        };
        let rotated = WebhookSettings::parse(with_secret)
            .expect("valid")
            .into_config(Some(stored), fresh);
        assert_eq!(rotated.signing_secret, rotated_text);
    }
}
