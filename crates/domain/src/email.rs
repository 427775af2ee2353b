//! Email addresses as the API accepts them.

use std::fmt;

use serde::{Serialize, Serializer};
use validator::ValidateEmail;

/// The longest address SMTP can carry (RFC 5321 path limit less the brackets).
pub const MAX_EMAIL_LENGTH: usize = 254;

/// An address that passed the HTML5/WHATWG email syntax check, kept as written.
/// Comparisons that decide identity (one contact per address) use [`EmailAddress::normalized`].
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct EmailAddress(String);

/// Why a text is not an email address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidEmail {
    /// Nothing was given.
    #[error("must not be empty")]
    Empty,
    /// Longer than [`MAX_EMAIL_LENGTH`].
    #[error("must be at most 254 characters")]
    TooLong,
    /// Not of the form local@domain.
    #[error("must be an email address")]
    Syntax,
}

impl EmailAddress {
    /// Checks the syntax; surrounding white space is an error, not silently trimmed.
    ///
    /// # Errors
    /// [`InvalidEmail`] saying what is wrong.
    pub fn parse(text: &str) -> Result<Self, InvalidEmail> {
        if text.is_empty() {
            return Err(InvalidEmail::Empty);
        }
        if text.len() > MAX_EMAIL_LENGTH {
            return Err(InvalidEmail::TooLong);
        }
        if !text.validate_email() {
            return Err(InvalidEmail::Syntax);
        }
        Ok(Self(text.to_owned()))
    }

    /// The address as the client wrote it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The lower-cased form used for uniqueness and exact matching.
    pub fn normalized(&self) -> String {
        normalize_email(&self.0)
    }
}

/// The form of an address that decides identity: lower case, as the contacts' unique key
/// (`email_lower`) and the suppression list's hashes have it. For addresses already
/// stored as written (a contact's, a message's); new input goes through
/// [`EmailAddress::normalized`].
pub fn normalize_email(text: &str) -> String {
    text.to_lowercase()
}

impl fmt::Display for EmailAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for EmailAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EmailAddress({})", self.0)
    }
}

impl Serialize for EmailAddress {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_addresses_and_rejects_the_rest() {
        assert!(EmailAddress::parse("ada@example.com").is_ok());
        assert_eq!(
            EmailAddress::parse("Ada@Example.COM")
                .expect("valid")
                .normalized(),
            "ada@example.com"
        );
        assert_eq!(EmailAddress::parse(""), Err(InvalidEmail::Empty));
        assert_eq!(
            EmailAddress::parse("not-an-email"),
            Err(InvalidEmail::Syntax)
        );
        assert_eq!(
            EmailAddress::parse(" ada@example.com"),
            Err(InvalidEmail::Syntax)
        );
        let long = format!("{}@example.com", "a".repeat(250));
        assert_eq!(EmailAddress::parse(&long), Err(InvalidEmail::TooLong));
    }
}
