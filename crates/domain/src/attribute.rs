//! Contact attributes: where they come from, their types, and their values.
//!
//! A contact's *resolved attributes* merge three sources:
//! - `system`: `email` (string), `create_date` (date), `message_count` (number);
//! - `custom`: written by contact upserts and by the `attributes` of recorded events; the
//!   first write of a slug fixes its type for the whole account;
//! - `event`: `event.<slug>` (date), when the contact last recorded that event.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::Timestamp;

/// The type of an attribute, fixed by the first write of its slug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttributeType {
    /// Text.
    String,
    /// A JSON number (stored as a double).
    Number,
    /// `true` or `false`.
    Boolean,
    /// A point in time (an RFC 3339 string when written).
    Date,
}

impl AttributeType {
    /// The wire and stored name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Number => "number",
            Self::Boolean => "boolean",
            Self::Date => "date",
        }
    }

    /// Reads the stored name.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "string" => Some(Self::String),
            "number" => Some(Self::Number),
            "boolean" => Some(Self::Boolean),
            "date" => Some(Self::Date),
            _ => None,
        }
    }
}

/// Where an attribute comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttributeSource {
    /// Maintained by Mailroom (`email`, `create_date`, `message_count`).
    System,
    /// Written by the API client.
    Custom,
    /// `event.<slug>`: the time of the contact's latest such event.
    Event,
}

impl AttributeSource {
    /// The wire and stored name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::System => "system",
            Self::Custom => "custom",
            Self::Event => "event",
        }
    }

    /// Reads the stored name.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "system" => Some(Self::System),
            "custom" => Some(Self::Custom),
            "event" => Some(Self::Event),
            _ => None,
        }
    }
}

/// An attribute's slug, type and source, as `GET …/attributes` lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttributeMeta {
    /// The slug (`plan`, `event.signed_up`, `email`).
    pub slug: String,
    /// Its type.
    pub attribute_type: AttributeType,
    /// Its source.
    pub source: AttributeSource,
}

/// The system attributes every contact has, in listing order.
pub const SYSTEM_ATTRIBUTES: [(&str, AttributeType); 3] = [
    ("email", AttributeType::String),
    ("create_date", AttributeType::Date),
    ("message_count", AttributeType::Number),
];

/// The prefix of event attributes.
pub const EVENT_ATTRIBUTE_PREFIX: &str = "event.";

/// The longest custom slug.
pub const MAX_ATTRIBUTE_SLUG: usize = 100;
/// The longest string value.
pub const MAX_STRING_VALUE: usize = 1000;
/// The most custom attribute slugs an account may have. Each is a row read with every
/// contact's attributes, a column of imports and a choice in the console's filters, and a
/// `sending` token may make them; unbounded, one tenant's key could fill the table.
pub const MAX_CUSTOM_ATTRIBUTES: u64 = 1_000;

/// Why a new custom slug is refused once the account has [`MAX_CUSTOM_ATTRIBUTES`].
pub fn too_many_custom_attributes() -> String {
    format!(
        "the account has {MAX_CUSTOM_ATTRIBUTES} custom attributes, the most it may have; \
         this one would be one more"
    )
}

/// A typed attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum AttributeValue {
    /// Text.
    String(String),
    /// A number.
    Number(f64),
    /// A boolean.
    Boolean(bool),
    /// A point in time.
    Date(Timestamp),
}

/// Why a custom attribute write was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidAttribute {
    /// The slug is not a template-variable name, or is reserved.
    #[error("attribute names must start with a letter or '_' and hold only letters, digits and '_' (at most 100); 'email', 'create_date', 'message_count' and 'event.*' are reserved")]
    Slug,
    /// The value is null, an array, an object, or too long.
    #[error("attribute values must be a string (at most 1000 characters), a number or a boolean")]
    Value,
    /// The slug already has another type in this account.
    #[error("is a {stored} attribute; a {given} value cannot be written to it")]
    TypeMismatch {
        /// The type fixed by the first write.
        stored: &'static str,
        /// The type of this write.
        given: &'static str,
    },
}

impl AttributeValue {
    /// The type of this value.
    pub fn attribute_type(&self) -> AttributeType {
        match self {
            Self::String(_) => AttributeType::String,
            Self::Number(_) => AttributeType::Number,
            Self::Boolean(_) => AttributeType::Boolean,
            Self::Date(_) => AttributeType::Date,
        }
    }

    /// Reads a custom attribute written as JSON: a boolean is a boolean, a number a
    /// number, an RFC 3339 string a date, any other string a string.
    ///
    /// # Errors
    /// [`InvalidAttribute::Value`] for null, arrays, objects, non-finite numbers,
    /// strings over 1000 characters and strings holding NUL.
    pub fn from_json(value: &Value) -> Result<Self, InvalidAttribute> {
        match value {
            Value::Bool(flag) => Ok(Self::Boolean(*flag)),
            Value::Number(number) => number
                .as_f64()
                .filter(|n| n.is_finite())
                .map(Self::Number)
                .ok_or(InvalidAttribute::Value),
            // NUL is refused because no text column can store it.
            Value::String(text)
                if text.chars().count() > MAX_STRING_VALUE || text.contains('\0') =>
            {
                Err(InvalidAttribute::Value)
            }
            Value::String(text) => {
                Ok(Timestamp::parse(text).map_or_else(|_| Self::String(text.clone()), Self::Date))
            }
            _ => Err(InvalidAttribute::Value),
        }
    }

    /// The JSON form of the value (dates as RFC 3339 with milliseconds).
    pub fn to_json(&self) -> Value {
        match self {
            Self::String(text) => Value::String(text.clone()),
            Self::Number(number) => {
                serde_json::Number::from_f64(*number).map_or(Value::Null, Value::Number)
            }
            Self::Boolean(flag) => Value::Bool(*flag),
            Self::Date(at) => Value::String(at.to_string()),
        }
    }
}

/// Checks a custom attribute slug: a template-variable name (`[A-Za-z_][A-Za-z0-9_]*`, at
/// most 100 characters) that is not a system slug and not an event slug. Slugs are kept
/// as written, because templates refer to them by that exact name.
///
/// # Errors
/// [`InvalidAttribute::Slug`].
pub fn check_custom_slug(slug: &str) -> Result<(), InvalidAttribute> {
    let mut chars = slug.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    let reserved = SYSTEM_ATTRIBUTES.iter().any(|(name, _)| *name == slug);
    if first_ok && rest_ok && slug.len() <= MAX_ATTRIBUTE_SLUG && !reserved {
        Ok(())
    } else {
        Err(InvalidAttribute::Slug)
    }
}

/// Checks that a write of `value` fits the type already fixed for its slug, if any.
///
/// # Errors
/// [`InvalidAttribute::TypeMismatch`].
pub fn check_type(
    stored: Option<AttributeType>,
    value: &AttributeValue,
) -> Result<(), InvalidAttribute> {
    match stored {
        Some(stored) if stored != value.attribute_type() => Err(InvalidAttribute::TypeMismatch {
            stored: stored.as_str(),
            given: value.attribute_type().as_str(),
        }),
        _ => Ok(()),
    }
}

/// A contact's resolved attributes: system, custom and event, by slug.
pub type ResolvedAttributes = BTreeMap<String, AttributeValue>;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn json_values_get_their_types() {
        assert_eq!(
            AttributeValue::from_json(&json!(true)),
            Ok(AttributeValue::Boolean(true))
        );
        assert_eq!(
            AttributeValue::from_json(&json!(3.5)),
            Ok(AttributeValue::Number(3.5))
        );
        assert_eq!(
            AttributeValue::from_json(&json!("pro")),
            Ok(AttributeValue::String("pro".into()))
        );
        let date = AttributeValue::from_json(&json!("2026-01-02T03:04:05Z")).expect("date");
        assert_eq!(date.attribute_type(), AttributeType::Date);
        assert_eq!(date.to_json(), json!("2026-01-02T03:04:05.000Z"));
        for bad in [
            json!(null),
            json!([1]),
            json!({"a": 1}),
            json!("x".repeat(1001)),
        ] {
            assert_eq!(
                AttributeValue::from_json(&bad),
                Err(InvalidAttribute::Value),
                "{bad}"
            );
        }
    }

    #[test]
    fn slugs_and_types_are_checked() {
        for good in ["first_name", "plan", "_x", "Score2"] {
            assert!(check_custom_slug(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "2x",
            "first-name",
            "event.signed_up",
            "email",
            "create_date",
            "a b",
        ] {
            assert!(check_custom_slug(bad).is_err(), "{bad}");
        }
        let number = AttributeValue::Number(1.0);
        assert!(check_type(None, &number).is_ok());
        assert!(check_type(Some(AttributeType::Number), &number).is_ok());
        assert!(check_type(Some(AttributeType::String), &number).is_err());
    }
}
