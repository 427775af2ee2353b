//! The three states of a field in a partial update: absent, `null`, or a value.

use serde::{Deserialize, Deserializer};

use crate::ValidationErrors;

/// A field of a request body: not sent, sent as `null`, or sent with a value.
/// Deserialize it with `#[serde(default)]` so a missing key reads as [`Field::Absent`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Field<T> {
    /// The key was not sent.
    #[default]
    Absent,
    /// The key was sent as `null`.
    Null,
    /// The key was sent with a value.
    Value(T),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Option::<T>::deserialize(deserializer).map(|value| value.map_or(Self::Null, Self::Value))
    }
}

impl<T> Field<T> {
    /// True when the key was sent at all.
    pub fn is_present(&self) -> bool {
        !matches!(self, Self::Absent)
    }

    /// The value of a field that may not be cleared: absent reads as `None`; `null` is
    /// recorded as an error under `name`.
    pub fn not_null(self, name: &str, errors: &mut ValidationErrors) -> Option<T> {
        match self {
            Self::Absent => None,
            Self::Null => {
                errors.push(name, "must not be null");
                None
            }
            Self::Value(value) => Some(value),
        }
    }

    /// The value of a required field: absent or `null` is recorded as an error.
    pub fn required(self, name: &str, errors: &mut ValidationErrors) -> Option<T> {
        match self {
            Self::Value(value) => Some(value),
            _ => {
                errors.push(name, "is required");
                None
            }
        }
    }

    /// Maps the value, keeping absent and null.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Field<U> {
        match self {
            Self::Absent => Field::Absent,
            Self::Null => Field::Null,
            Self::Value(value) => Field::Value(f(value)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Body {
        #[serde(default)]
        name: Field<String>,
    }

    #[test]
    fn tells_absent_null_and_value_apart() {
        let parse = |s: &str| serde_json::from_str::<Body>(s).map(|b| b.name).ok();
        assert_eq!(parse("{}"), Some(Field::Absent));
        assert_eq!(parse(r#"{"name":null}"#), Some(Field::Null));
        assert_eq!(parse(r#"{"name":"x"}"#), Some(Field::Value("x".into())));
        let mut errors = ValidationErrors::new();
        assert_eq!(Field::<String>::Null.not_null("name", &mut errors), None);
        assert_eq!(Field::<String>::Absent.required("slug", &mut errors), None);
        assert_eq!(errors.0.len(), 2);
    }
}
