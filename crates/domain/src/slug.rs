//! Slugs: contact-event names normalised to snake_case, and template slugs.

use std::fmt;

use serde::Serialize;

/// The longest slug accepted, before and after normalisation.
pub const MAX_SLUG_LENGTH: usize = 100;

/// Why a text cannot be a slug.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSlug {
    /// Nothing (or nothing but separators) was given.
    #[error("must contain at least one letter or digit")]
    Empty,
    /// Longer than [`MAX_SLUG_LENGTH`].
    #[error("must be at most 100 characters")]
    TooLong,
    /// A template slug holds a character outside `[a-z0-9-_]`.
    #[error("may contain only lowercase letters, digits, '-' and '_'")]
    Characters,
}

/// A contact-event (or trigger) name in snake_case: `signedUp`, `Signed Up` and
/// `signed-up` all become `signed_up`; `HTTPRequest` becomes `http_request`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct EventSlug(String);

impl EventSlug {
    /// Normalises any spelling to snake_case.
    ///
    /// Word boundaries are white space, punctuation, a lower-to-upper case change
    /// (`signedUp`), and the last capital of an acronym before a lower-case letter
    /// (`HTTPRequest`). Letters are lower-cased; digits stay attached to their word.
    ///
    /// # Errors
    /// [`InvalidSlug`] when nothing alphanumeric remains or the result is too long.
    pub fn normalize(text: &str) -> Result<Self, InvalidSlug> {
        let chars: Vec<char> = text.chars().collect();
        let mut out = String::with_capacity(text.len() + 4);
        let mut pending_separator = false;
        for (i, &c) in chars.iter().enumerate() {
            if !c.is_alphanumeric() {
                pending_separator = !out.is_empty();
                continue;
            }
            if c.is_uppercase() && !out.is_empty() {
                let prev = chars[i - 1];
                let next_is_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
                let boundary = prev.is_lowercase()
                    || prev.is_ascii_digit()
                    || (prev.is_uppercase() && next_is_lower);
                if boundary {
                    pending_separator = true;
                }
            }
            if pending_separator {
                out.push('_');
                pending_separator = false;
            }
            out.extend(c.to_lowercase());
        }
        if out.is_empty() {
            return Err(InvalidSlug::Empty);
        }
        if out.chars().count() > MAX_SLUG_LENGTH {
            return Err(InvalidSlug::TooLong);
        }
        Ok(Self(out))
    }

    /// Wraps a slug read back from storage, where it was stored normalised.
    pub fn from_stored(text: String) -> Self {
        Self(text)
    }

    /// The normalised text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EventSlug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A template's short identifier: 1–100 characters of `[a-z0-9-_]`, unique per account.
/// Unlike event slugs it is not rewritten: a client that sends `Welcome` gets a 400,
/// because the transactional send looks templates up by this exact text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct TemplateSlug(String);

impl TemplateSlug {
    /// Checks length and alphabet.
    ///
    /// # Errors
    /// [`InvalidSlug`] saying which rule failed.
    pub fn parse(text: &str) -> Result<Self, InvalidSlug> {
        if text.is_empty() {
            return Err(InvalidSlug::Empty);
        }
        if text.len() > MAX_SLUG_LENGTH {
            return Err(InvalidSlug::TooLong);
        }
        if !text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err(InvalidSlug::Characters);
        }
        Ok(Self(text.to_owned()))
    }

    /// The slug.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TemplateSlug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(text: &str) -> String {
        EventSlug::normalize(text)
            .expect("normalises")
            .as_str()
            .to_owned()
    }

    #[test]
    fn event_slugs_become_snake_case() {
        assert_eq!(norm("signedUp"), "signed_up");
        assert_eq!(norm("Signed Up"), "signed_up");
        assert_eq!(norm("signed-up"), "signed_up");
        assert_eq!(norm("signed_up"), "signed_up");
        assert_eq!(norm("HTTPRequest"), "http_request");
        assert_eq!(norm("  Order  Placed!! "), "order_placed");
        assert_eq!(norm("step2Done"), "step2_done");
        assert_eq!(norm("SIGNED_UP"), "signed_up");
        assert_eq!(EventSlug::normalize(" -_ "), Err(InvalidSlug::Empty));
        assert_eq!(
            EventSlug::normalize(&"a".repeat(101)),
            Err(InvalidSlug::TooLong)
        );
    }

    #[test]
    fn normalisation_is_idempotent() {
        for text in ["signedUp", "HTTPRequest", "a b c", "x1Y2z3"] {
            let once = norm(text);
            assert_eq!(norm(&once), once);
        }
    }

    #[test]
    fn template_slugs_keep_their_alphabet() {
        assert!(TemplateSlug::parse("welcome-email_2").is_ok());
        assert_eq!(TemplateSlug::parse(""), Err(InvalidSlug::Empty));
        assert_eq!(TemplateSlug::parse("Welcome"), Err(InvalidSlug::Characters));
        assert_eq!(TemplateSlug::parse("a b"), Err(InvalidSlug::Characters));
    }
}
