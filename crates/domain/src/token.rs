//! Personal access tokens: the raw format, its offline checksum, and the stored hash.
//!
//! A raw token is `mailroom_pat_` followed by 64 lowercase hex digits: 56 of randomness and
//! 8 of CRC32 over everything before them. The checksum lets a secret scanner recognise a
//! leaked token offline and lets the service refuse garbage without a database look-up.
//! Only the SHA-256 of the raw value is ever stored.

use std::fmt;

use sha2::{Digest, Sha256};

use crate::Timestamp;

/// The fixed prefix of every raw token.
pub const TOKEN_PREFIX: &str = "mailroom_pat_";
/// How many random bytes a token carries (56 hex digits).
pub const TOKEN_RANDOM_BYTES: usize = 28;
const RANDOM_HEX: usize = TOKEN_RANDOM_BYTES * 2;
const CHECK_HEX: usize = 8;

/// A raw token value. It is shown to its owner once and never logged.
#[derive(Clone, PartialEq, Eq)]
pub struct RawToken(String);

/// Why a presented token is not one of ours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidToken {
    /// It does not start with [`TOKEN_PREFIX`].
    #[error("token prefix is missing")]
    Prefix,
    /// The part after the prefix is not 64 lowercase hex digits.
    #[error("token is not 64 lowercase hex digits after the prefix")]
    Shape,
    /// The check digits do not match.
    #[error("token checksum does not match")]
    Checksum,
}

impl RawToken {
    /// Builds a token from fresh randomness, appending the CRC32 check digits.
    pub fn from_random(random: [u8; TOKEN_RANDOM_BYTES]) -> Self {
        let body = format!("{TOKEN_PREFIX}{}", hex::encode(random));
        let check = crc32fast::hash(body.as_bytes());
        Self(format!("{body}{check:08x}"))
    }

    /// Checks prefix, shape and check digits of a presented value.
    ///
    /// # Errors
    /// [`InvalidToken`] naming the first check that failed.
    pub fn parse(text: &str) -> Result<Self, InvalidToken> {
        let rest = text
            .strip_prefix(TOKEN_PREFIX)
            .ok_or(InvalidToken::Prefix)?;
        if rest.len() != RANDOM_HEX + CHECK_HEX
            || !rest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(InvalidToken::Shape);
        }
        let (body, check) = text.split_at(TOKEN_PREFIX.len() + RANDOM_HEX);
        let expected = format!("{:08x}", crc32fast::hash(body.as_bytes()));
        if check != expected {
            return Err(InvalidToken::Checksum);
        }
        Ok(Self(text.to_owned()))
    }

    /// The raw value, for the one response that returns it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The SHA-256 that is stored and looked up instead of the value.
    pub fn hash(&self) -> TokenHash {
        TokenHash(Sha256::digest(self.0.as_bytes()).into())
    }
}

impl fmt::Debug for RawToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RawToken([redacted])")
    }
}

/// SHA-256 of a raw token.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenHash(pub [u8; 32]);

impl fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenHash({})", hex::encode(&self.0[..4]))
    }
}

/// The lifetimes a token may be issued with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenLifetime {
    /// Expires 30 days after issue.
    Days30,
    /// Expires 60 days after issue.
    Days60,
    /// Expires 90 days after issue.
    Days90,
    /// Never expires.
    Unlimited,
}

/// `expiresInDays` was not 30, 60, 90 or null.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be 30, 60, 90 or null")]
pub struct InvalidLifetime;

impl TokenLifetime {
    /// Reads `expiresInDays`: absent or null never expires.
    ///
    /// # Errors
    /// [`InvalidLifetime`] for any other number.
    pub fn from_days(days: Option<i64>) -> Result<Self, InvalidLifetime> {
        match days {
            None => Ok(Self::Unlimited),
            Some(30) => Ok(Self::Days30),
            Some(60) => Ok(Self::Days60),
            Some(90) => Ok(Self::Days90),
            Some(_) => Err(InvalidLifetime),
        }
    }

    /// Whole days until expiry, or `None` for a token that never expires.
    pub fn days(&self) -> Option<i64> {
        match self {
            Self::Days30 => Some(30),
            Self::Days60 => Some(60),
            Self::Days90 => Some(90),
            Self::Unlimited => None,
        }
    }
}

/// A token asked to outlive the token that creates it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "may not outlive the token that creates it, which expires at {minter_expires_at}: \
     ask for a shorter lifetime, or create this token with a longer-lived one"
)]
pub struct OutlivesMinter {
    /// When the creating token expires.
    pub minter_expires_at: Timestamp,
}

/// Checks that a token expiring at `expires_at` (`None`: never) does not outlive the
/// token that creates it, expiring at `minter_expires_at`. A token that never expires may
/// create any token; an expiring one only tokens that expire no later than itself, so a
/// leaked short-lived token cannot be turned into a lasting one (a 30-day token cannot
/// create a never-expiring one, nor a 90-day one, nor, once a moment has passed, a
/// 30-day one).
///
/// ```
/// use mailroom_domain::{token::within_minter, Timestamp};
/// use time::Duration;
///
/// let now = Timestamp::parse("2026-11-24T12:00:00.000Z").unwrap();
/// let minter = Some(now.plus(Duration::days(60)));
/// assert!(within_minter(Some(now.plus(Duration::days(30))), minter).is_ok());
/// assert!(within_minter(Some(now.plus(Duration::days(90))), minter).is_err());
/// assert!(within_minter(None, minter).is_err());
/// assert!(within_minter(None, None).is_ok());
/// ```
///
/// # Errors
/// [`OutlivesMinter`] when the new token would expire later, or never.
pub fn within_minter(
    expires_at: Option<Timestamp>,
    minter_expires_at: Option<Timestamp>,
) -> Result<(), OutlivesMinter> {
    match (expires_at, minter_expires_at) {
        (_, None) => Ok(()),
        (Some(new), Some(minter)) if new <= minter => Ok(()),
        (_, Some(minter)) => Err(OutlivesMinter {
            minter_expires_at: minter,
        }),
    }
}

/// The longest token name accepted.
pub const MAX_TOKEN_NAME: usize = 100;

/// A token's label: 1 to 100 characters after trimming.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenName(String);

impl TokenName {
    /// Trims and checks the length.
    ///
    /// # Errors
    /// A message for the `name` field.
    pub fn parse(text: &str) -> Result<Self, crate::account::InvalidName> {
        crate::account::bounded_name(text, MAX_TOKEN_NAME).map(Self)
    }

    /// The label.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a token may do. `Full` is every route its user may call; `Sending` is what a
/// product backend needs to record events and send mail, see [`TokenScope::allows`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TokenScope {
    /// Every route the user may call.
    #[default]
    Full,
    /// Only the routes of [`SENDING_ROUTES`].
    Sending,
}

/// `scope` was not `full` or `sending`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be full or sending")]
pub struct InvalidScope;

/// One route a [`TokenScope::Sending`] token may call: a method, a path pattern under
/// `/v2` whose `{…}` segments match one well-formed record id (so `{messageId}` does not
/// match the sibling routes `messages/count` or `messages/stats`), and a query parameter the request
/// must carry with a value (for `GET …/contacts`, the look-up by `email` and not the
/// list of every contact).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScopedRoute {
    /// The HTTP method, upper case.
    pub method: &'static str,
    /// The path pattern, starting at `/v2`.
    pub pattern: &'static str,
    /// A query parameter that must be present with a non-empty value.
    pub required_query: Option<&'static str>,
}

/// The one table of what a `sending` token may call. Beyond the four account routes of
/// the sending scope and the cancels of what it sent, a sending token may mint its own successor (within its scope, pins
/// and lifetime) and revoke itself, so a product backend can rotate its credential
/// without holding a full token.
pub const SENDING_ROUTES: [ScopedRoute; 8] = [
    ScopedRoute {
        method: "POST",
        pattern: "/v2/accounts/{accountId}/events",
        required_query: None,
    },
    ScopedRoute {
        method: "POST",
        pattern: "/v2/accounts/{accountId}/messages",
        required_query: None,
    },
    ScopedRoute {
        method: "GET",
        pattern: "/v2/accounts/{accountId}/messages/{messageId}",
        required_query: None,
    },
    ScopedRoute {
        method: "POST",
        pattern: "/v2/accounts/{accountId}/messages/{messageId}/cancel",
        required_query: None,
    },
    ScopedRoute {
        method: "POST",
        pattern: "/v2/accounts/{accountId}/messages/cancel",
        required_query: None,
    },
    ScopedRoute {
        method: "GET",
        pattern: "/v2/accounts/{accountId}/contacts",
        required_query: Some("email"),
    },
    ScopedRoute {
        method: "POST",
        pattern: "/v2/users/me/tokens",
        required_query: None,
    },
    ScopedRoute {
        method: "DELETE",
        pattern: "/v2/users/me/tokens/{tokenId}",
        required_query: None,
    },
];

impl ScopedRoute {
    /// Whether a request (`method`, `path` as received, `query` without the `?`) is
    /// this route.
    #[must_use]
    pub fn matches(&self, method: &str, path: &str, query: &str) -> bool {
        if !self.method.eq_ignore_ascii_case(method) {
            return false;
        }
        let mut expected = self.pattern.split('/');
        let mut actual = path.split('/');
        loop {
            match (expected.next(), actual.next()) {
                (None, None) => break,
                (Some(want), Some(got)) => {
                    let fits = if want.starts_with('{') {
                        is_record_id(got)
                    } else {
                        want == got
                    };
                    if !fits {
                        return false;
                    }
                }
                _ => return false,
            }
        }
        self.required_query.is_none_or(|name| {
            query.split('&').any(|pair| {
                pair.split_once('=')
                    .is_some_and(|(key, value)| key == name && !value.is_empty())
            })
        })
    }
}

/// Whether `segment` is a record id in its canonical text form (a hyphenated UUID).
fn is_record_id(segment: &str) -> bool {
    segment.len() == 36 && uuid::Uuid::try_parse(segment).is_ok()
}

impl TokenScope {
    /// Reads `scope`: absent is `full`.
    ///
    /// # Errors
    /// [`InvalidScope`] for anything but `full` or `sending`.
    pub fn parse(text: Option<&str>) -> Result<Self, InvalidScope> {
        match text {
            None | Some("full") => Ok(Self::Full),
            Some("sending") => Ok(Self::Sending),
            Some(_) => Err(InvalidScope),
        }
    }

    /// The stored and shown text form.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Sending => "sending",
        }
    }

    /// Reads the stored text form; unknown text reads as `sending`, the lesser scope.
    #[must_use]
    pub fn from_stored(text: &str) -> Self {
        if text == "full" {
            Self::Full
        } else {
            Self::Sending
        }
    }

    /// Whether a token of this scope may call this request (`method`, `path` as
    /// received, `query` without the `?`). Membership and pins are checked apart.
    #[must_use]
    pub fn allows(&self, method: &str, path: &str, query: &str) -> bool {
        match self {
            Self::Full => true,
            Self::Sending => SENDING_ROUTES
                .iter()
                .any(|route| route.matches(method, path, query)),
        }
    }

    /// Whether a token of this scope may mint a token of scope `other`: a sending token
    /// mints only sending tokens.
    #[must_use]
    pub fn covers(&self, other: Self) -> bool {
        *self == Self::Full || other == Self::Sending
    }
}

/// Whether a token pinned to `minter` (`None`: every account of its user) may mint one
/// pinned to `minted`: an unpinned token mints anything; a pinned one only tokens pinned
/// to some of its own accounts.
#[must_use]
pub fn pins_within<T: PartialEq>(minted: Option<&[T]>, minter: Option<&[T]>) -> bool {
    match (minted, minter) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(minted), Some(minter)) => minted.iter().all(|pin| minter.contains(pin)),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_sending_scope_allows_its_table_only() {
        use super::TokenScope::{Full, Sending};
        let account = "/v2/accounts/01936c5e-7b2a-7cde-8f00-0123456789ab";
        let message = "01936c5e-7b2a-7cde-8f00-0123456789ac";
        assert!(Sending.allows("POST", &format!("{account}/events"), ""));
        assert!(Sending.allows("post", &format!("{account}/messages"), ""));
        assert!(Sending.allows("GET", &format!("{account}/messages/{message}"), ""));
        assert!(!Sending.allows("GET", &format!("{account}/messages/count"), ""));
        assert!(!Sending.allows("GET", &format!("{account}/messages/stats"), ""));
        assert!(!Sending.allows("POST", "/v2/accounts/x/events", ""));
        assert!(Sending.allows(
            "GET",
            &format!("{account}/contacts"),
            "limit=1&email=a%40b.c"
        ));
        assert!(!Sending.allows("GET", &format!("{account}/contacts"), "email="));
        assert!(!Sending.allows("GET", &format!("{account}/contacts"), "limit=1"));
        assert!(!Sending.allows("GET", &format!("{account}/messages"), ""));
        assert!(!Sending.allows("GET", &format!("{account}/messages/"), ""));
        assert!(!Sending.allows("GET", &format!("{account}/messages/{message}/x"), ""));
        assert!(!Sending.allows("POST", &format!("{account}/templates"), ""));
        assert!(!Sending.allows("GET", "/v2/accounts", ""));
        assert!(Sending.allows("DELETE", &format!("/v2/users/me/tokens/{message}"), ""));
        assert!(!Sending.allows("GET", "/v2/users/me/tokens", ""));
        assert!(Full.allows("GET", "/v2/accounts", ""));
        assert!(Full.covers(Sending) && Full.covers(Full) && Sending.covers(Sending));
        assert!(!Sending.covers(Full));
    }

    #[test]
    fn pins_stay_within_the_minters() {
        use super::pins_within;
        assert!(pins_within::<u8>(None, None));
        assert!(pins_within(Some(&[1][..]), None));
        assert!(!pins_within(None, Some(&[1][..])));
        assert!(pins_within(Some(&[1][..]), Some(&[1, 2][..])));
        assert!(!pins_within(Some(&[1, 3][..]), Some(&[1, 2][..])));
    }

    use super::*;

    #[test]
    fn generated_tokens_have_prefix_hex_run_and_valid_check_digits() {
        let token = RawToken::from_random([7u8; TOKEN_RANDOM_BYTES]);
        let text = token.expose();
        assert!(text.starts_with("mailroom_pat_"));
        assert_eq!(text.len(), TOKEN_PREFIX.len() + 64);
        assert_eq!(RawToken::parse(text), Ok(token.clone()));
        let crc = crc32fast::hash(&text.as_bytes()[..text.len() - 8]);
        assert_eq!(&text[text.len() - 8..], format!("{crc:08x}"));
    }

    #[test]
    fn rejects_foreign_and_tampered_values() {
        let token = RawToken::from_random([1u8; TOKEN_RANDOM_BYTES]);
        let text = token.expose().to_owned();
        assert_eq!(RawToken::parse("ghp_abc"), Err(InvalidToken::Prefix));
        assert_eq!(
            RawToken::parse("mailroom_pat_xyz"),
            Err(InvalidToken::Shape)
        );
        assert_eq!(
            RawToken::parse(
                &text
                    .to_uppercase()
                    .replace("MAILROOM_PAT_", "mailroom_pat_")
            ),
            Err(InvalidToken::Shape)
        );
        let mut tampered = text.into_bytes();
        let i = TOKEN_PREFIX.len();
        tampered[i] = if tampered[i] == b'0' { b'1' } else { b'0' };
        let tampered = String::from_utf8(tampered).expect("ascii");
        assert_eq!(RawToken::parse(&tampered), Err(InvalidToken::Checksum));
    }

    #[test]
    fn lifetimes() {
        assert_eq!(TokenLifetime::from_days(None), Ok(TokenLifetime::Unlimited));
        assert_eq!(
            TokenLifetime::from_days(Some(60)).map(|l| l.days()),
            Ok(Some(60))
        );
        for bad in [0, 1, 29, 31, 365, -30] {
            assert_eq!(TokenLifetime::from_days(Some(bad)), Err(InvalidLifetime));
        }
    }
}
