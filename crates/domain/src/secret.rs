//! Secret text that never reaches a log line or a `Debug` print.

use std::fmt;

/// How many trailing characters [`SecretString::suffix`] shows.
const SUFFIX_CHARS: usize = 4;

/// The shortest secret whose last four characters are shown: at eight, at least half of
/// it stays hidden. A shorter one (a webhook credential may be any non-empty value,
/// [`crate::webhook`]) reads fully masked.
pub const MIN_SECRET_WITH_SUFFIX: usize = 8;

/// A secret string (password, token, signing secret). `Debug` and `Display` print
/// `[redacted]`; the value is reachable only through [`SecretString::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct SecretString(String);

impl SecretString {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that must use it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `"****"` followed by [`SecretString::suffix`]: how webhook secrets read back. A
    /// secret shorter than [`MIN_SECRET_WITH_SUFFIX`] reads as `"****"` alone.
    pub fn masked_suffix(&self) -> String {
        format!("****{}", self.suffix())
    }

    /// The last four characters, so the owner can tell secrets apart; empty for a secret
    /// shorter than [`MIN_SECRET_WITH_SUFFIX`] characters, whose last four would be most
    /// or all of it.
    pub fn suffix(&self) -> String {
        let chars: Vec<char> = self.0.chars().collect();
        if chars.len() < MIN_SECRET_WITH_SUFFIX {
            return String::new();
        }
        chars[chars.len() - SUFFIX_CHARS..].iter().collect()
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretString([redacted])")
    }
}

impl fmt::Display for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_prints_the_value() {
        let secret = SecretString::new("hunter2-secret");
        assert!(!format!("{secret:?} {secret}").contains("hunter2"));
        assert_eq!(secret.masked_suffix(), "****cret");
    }

    #[test]
    fn secrets_under_8_characters_are_masked_whole() {
        // 4 characters: "****" + last four would be the whole secret.
        assert_eq!(SecretString::new("abcd").masked_suffix(), "****");
        assert_eq!(SecretString::new("ab").masked_suffix(), "****");
        assert_eq!(SecretString::new("").suffix(), "");
        // 7 characters: the last four would be most of it.
        assert_eq!(SecretString::new("abcdefg").masked_suffix(), "****");
        assert_eq!(SecretString::new("abcdefg").suffix(), "");
        // 8 characters: the last four show, the first four stay hidden.
        assert_eq!(SecretString::new("abcdefgh").masked_suffix(), "****efgh");
        // Characters, not bytes: 8 two-byte characters show their last four.
        assert_eq!(SecretString::new("ééééàààà").suffix(), "àààà");
        assert_eq!(SecretString::new("éééàààà").suffix(), "");
    }
}
