//! Tracking and unsubscribe links (docs/design.md#8-delivery, Tracking and Unsubscribe).
//!
//! The delivery worker mints, per message, an unsubscribe URL (`/u/{token}`, also the
//! `unsubscribe_url` and `preferences_url` template variables and, for announcement and
//! automation mail, the `List-Unsubscribe` target), an open pixel (`/t/o/{token}`) and
//! click URLs (`/t/c/{token}`) when the effective tracking flags say so
//! ([`delivery`]). The links a message's clicks lead to are stored with the message; a
//! click token names a message and a position, never a URL, so the redirect target never
//! comes from the request. The public endpoints call [`record_open`] and
//! [`follow_click`]; the unsubscribe page is in [`crate::unsubscribe`].

pub(crate) mod delivery;
mod record;
pub mod rewrite;
pub mod token;

pub use record::{follow_click, message_engagement, record_open, Engagement};
pub use token::LinkToken;

/// Where the public link endpoints are reached, from the operator's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSettings {
    /// The base URL recipients' mail clients reach (`MAILROOM_PUBLIC_URL`), without a
    /// trailing slash.
    pub public_url: String,
    /// The address of a `mailto:` entry in `List-Unsubscribe`
    /// (`MAILROOM_UNSUBSCRIBE_MAILTO`); `None` leaves it out.
    pub unsubscribe_mailto: Option<String>,
}

impl LinkSettings {
    /// The URL of the open pixel, a click or the unsubscribe page named by `token`.
    pub fn url(&self, token: &LinkToken, secrets: &dyn crate::ports::Secrets) -> String {
        let route = match token {
            LinkToken::Open { .. } => "t/o",
            LinkToken::Click { .. } => "t/c",
            LinkToken::Unsubscribe { .. } => "u",
        };
        format!("{}/{route}/{}", self.public_url, token.encode(secrets))
    }
}
