//! The admin console's credentials: session cookies, CSRF tokens and one-time login links.
//!
//! Each is 32 random bytes written as 43 URL-safe base64 characters. Session and link
//! values are stored only as their SHA-256 (as tokens are), so a copy of the database
//! signs nobody in. How the console uses them is in `docs/console.md`.

use std::fmt;

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use sha2::{Digest, Sha256};
use time::Duration;

/// How many random bytes a console secret carries.
pub const CONSOLE_SECRET_BYTES: usize = 32;
/// Its length as text (URL-safe base64 without padding).
const CONSOLE_SECRET_CHARS: usize = 43;

/// How long a console session lasts from sign-in, whatever its use: a stolen cookie is
/// worth a working day at most.
pub const SESSION_LIFETIME: Duration = Duration::hours(12);
/// How long a login link printed by `mailroom user login-link` can be used (once).
pub const LOGIN_LINK_LIFETIME: Duration = Duration::minutes(15);

/// A session cookie value, a CSRF token or a login link's secret. Never logged.
#[derive(Clone, PartialEq, Eq)]
pub struct ConsoleSecret(String);

/// A presented value that cannot be one of ours (so nothing is looked up).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a console secret")]
pub struct InvalidConsoleSecret;

impl ConsoleSecret {
    /// Writes fresh randomness as text.
    #[must_use]
    pub fn from_random(random: [u8; CONSOLE_SECRET_BYTES]) -> Self {
        Self(URL_SAFE_NO_PAD.encode(random))
    }

    /// Checks the shape of a presented value: 43 URL-safe base64 characters.
    ///
    /// # Errors
    /// [`InvalidConsoleSecret`] for anything else.
    pub fn parse(text: &str) -> Result<Self, InvalidConsoleSecret> {
        let shaped = text.len() == CONSOLE_SECRET_CHARS
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if shaped {
            Ok(Self(text.to_owned()))
        } else {
            Err(InvalidConsoleSecret)
        }
    }

    /// The value, for the cookie, the form field or the link that carries it.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The SHA-256 that is stored and looked up instead of the value.
    #[must_use]
    pub fn hash(&self) -> ConsoleSecretHash {
        ConsoleSecretHash(Sha256::digest(self.0.as_bytes()).into())
    }

    /// Whether `presented` is this value, compared in time independent of where they
    /// differ (a CSRF token must not be guessable byte by byte).
    #[must_use]
    pub fn matches(&self, presented: &str) -> bool {
        let (ours, theirs) = (self.0.as_bytes(), presented.as_bytes());
        ours.len() == theirs.len()
            && ours
                .iter()
                .zip(theirs)
                .fold(0u8, |diff, (a, b)| diff | (a ^ b))
                == 0
    }
}

impl fmt::Debug for ConsoleSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ConsoleSecret([redacted])")
    }
}

/// SHA-256 of a [`ConsoleSecret`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConsoleSecretHash(pub [u8; 32]);

impl fmt::Debug for ConsoleSecretHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ConsoleSecretHash({:02x}{:02x}…)", self.0[0], self.0[1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_round_trips_and_garbage_is_refused() {
        let secret = ConsoleSecret::from_random([7; CONSOLE_SECRET_BYTES]);
        assert_eq!(secret.expose().len(), CONSOLE_SECRET_CHARS);
        assert_eq!(ConsoleSecret::parse(secret.expose()), Ok(secret.clone()));
        assert!(ConsoleSecret::parse("").is_err());
        assert!(ConsoleSecret::parse(&"a".repeat(44)).is_err());
        assert!(ConsoleSecret::parse(&format!("{}=", &secret.expose()[..42])).is_err());
    }

    #[test]
    fn matching_needs_the_whole_value() {
        let secret = ConsoleSecret::from_random([9; CONSOLE_SECRET_BYTES]);
        assert!(secret.matches(secret.expose()));
        assert!(!secret.matches(&secret.expose()[..42]));
        assert!(!secret.matches(""));
        let other = ConsoleSecret::from_random([8; CONSOLE_SECRET_BYTES]);
        assert!(!secret.matches(other.expose()));
    }
}
