//! Secret text that never reaches a log line or a `Debug` print.

use std::fmt;

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

    /// `"****"` followed by the last four characters: how webhook secrets read back.
    pub fn masked_suffix(&self) -> String {
        format!("****{}", self.suffix())
    }

    /// The last four characters (fewer when the secret is shorter).
    pub fn suffix(&self) -> String {
        let chars: Vec<char> = self.0.chars().collect();
        chars[chars.len().saturating_sub(4)..].iter().collect()
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
        assert_eq!(SecretString::new("ab").masked_suffix(), "****ab");
    }
}
