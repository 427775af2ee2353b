//! Validation errors that name the offending field, so the HTTP layer can report each one.

use serde::Serialize;

/// One problem with one input field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// The field as the API client spells it (`timingValue`, `webhooks.url`).
    pub field: String,
    /// A sentence a person can act on.
    pub message: String,
}

impl FieldError {
    /// A problem with `field`, explained by `message`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Every problem found in one input, collected so a client can fix them all at once.
#[derive(Debug, Clone, Default, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.summary())]
pub struct ValidationErrors(pub Vec<FieldError>);

impl ValidationErrors {
    /// An empty collection, to be filled with [`ValidationErrors::push`].
    pub fn new() -> Self {
        Self(Vec::new())
    }

    /// A collection holding one error.
    pub fn single(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self(vec![FieldError::new(field, message)])
    }

    /// Adds one error.
    pub fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError::new(field, message));
    }

    /// Records the error of a failed parse under `field` and returns the parsed value, if any.
    pub fn collect<T, E: std::fmt::Display>(
        &mut self,
        field: &str,
        parsed: Result<T, E>,
    ) -> Option<T> {
        match parsed {
            Ok(value) => Some(value),
            Err(error) => {
                self.push(field, error.to_string());
                None
            }
        }
    }

    /// A required name: trimmed, not empty, at most `max` characters.
    pub fn required_name(
        &mut self,
        field: &str,
        value: Option<&str>,
        max: usize,
    ) -> Option<String> {
        match value.map(str::trim) {
            None => self.push(field, "is required"),
            Some("") => self.push(field, "must not be empty"),
            Some(name) if name.chars().count() > max => {
                self.push(field, format!("must be at most {max} characters"));
            }
            Some(name) => return Some(name.to_owned()),
        }
        None
    }

    /// A required id of one of the account's records (`what` names the kind, e.g.
    /// "template"); whether the record exists is the use case's question.
    pub fn required_id<T: std::str::FromStr>(
        &mut self,
        field: &str,
        value: Option<&str>,
        what: &str,
    ) -> Option<T> {
        let Some(text) = value else {
            self.push(field, "is required");
            return None;
        };
        let parsed = text.parse().ok();
        if parsed.is_none() {
            self.push(field, format!("must be the id of a {what} of this account"));
        }
        parsed
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `Ok(())` when empty, otherwise `Err(self)`.
    pub fn into_result(self) -> Result<(), Self> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(self)
        }
    }

    /// One line naming every field and its problem.
    pub fn summary(&self) -> String {
        self.0
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect::<Vec<_>>()
            .join("; ")
    }
}
