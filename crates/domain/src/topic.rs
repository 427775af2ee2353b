//! Announcement topics: categories a contact may unsubscribe from on their own.

use crate::{account::bounded_name, patch::Field, Timestamp, TopicId, ValidationErrors};

/// The longest topic name.
pub const MAX_TOPIC_NAME: usize = 200;
/// The longest topic description.
pub const MAX_TOPIC_DESCRIPTION: usize = 1000;

/// A topic to be stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// Shown to contacts on the unsubscribe page.
    pub name: String,
    /// What the category covers.
    pub description: Option<String>,
}

/// A stored topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic {
    /// Id.
    pub id: TopicId,
    /// Name.
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// A topic body as received.
#[derive(Debug, Clone, Default)]
pub struct TopicInput {
    /// `name`.
    pub name: Field<String>,
    /// `description`.
    pub description: Field<String>,
}

/// A parsed topic update: `description: Some(None)` clears it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicPatch {
    /// New name.
    pub name: Option<String>,
    /// Set or clear the description.
    pub description: Option<Option<String>>,
}

impl TopicInput {
    fn parse_fields(self, errors: &mut ValidationErrors) -> TopicPatch {
        let name = self
            .name
            .not_null("name", errors)
            .and_then(|name| errors.collect("name", bounded_name(&name, MAX_TOPIC_NAME)));
        let description = match self.description {
            Field::Absent => None,
            Field::Null => Some(None),
            Field::Value(text) if text.chars().count() > MAX_TOPIC_DESCRIPTION => {
                errors.push(
                    "description",
                    format!("must be at most {MAX_TOPIC_DESCRIPTION} characters"),
                );
                None
            }
            // An empty description is no description.
            Field::Value(text) if text.trim().is_empty() => Some(None),
            Field::Value(text) => Some(Some(text)),
        };
        TopicPatch { name, description }
    }

    /// Parses a creation body: `name` required, `description` optional.
    ///
    /// # Errors
    /// Every problem, each under its field.
    pub fn parse_new(self) -> Result<NewTopic, ValidationErrors> {
        let mut errors = ValidationErrors::new();
        if !matches!(self.name, Field::Value(_)) {
            errors.push("name", "is required");
        }
        let patch = self.parse_fields(&mut errors);
        errors.into_result()?;
        let name = patch
            .name
            .ok_or_else(|| ValidationErrors::single("name", "is required"))?;
        Ok(NewTopic {
            name,
            description: patch.description.flatten(),
        })
    }

    /// Parses an update; an empty body is refused.
    ///
    /// # Errors
    /// Every problem, each under its field.
    pub fn parse_patch(self) -> Result<TopicPatch, ValidationErrors> {
        let mut errors = ValidationErrors::new();
        let patch = self.parse_fields(&mut errors);
        errors.into_result()?;
        if patch == TopicPatch::default() {
            return Err(ValidationErrors::single(
                "body",
                "must change name or description",
            ));
        }
        Ok(patch)
    }
}

impl TopicPatch {
    /// Applies the patch.
    pub fn apply(self, topic: &mut Topic) {
        if let Some(name) = self.name {
            topic.name = name;
        }
        if let Some(description) = self.description {
            topic.description = description;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_need_a_name_and_patches_keep_what_is_omitted() {
        assert!(TopicInput::default().parse_new().is_err());
        let new = TopicInput {
            name: Field::Value("Billing".into()),
            ..TopicInput::default()
        }
        .parse_new()
        .expect("valid");
        assert_eq!(new.description, None);
        assert!(TopicInput::default().parse_patch().is_err());
        let patch = TopicInput {
            description: Field::Null,
            ..TopicInput::default()
        }
        .parse_patch()
        .expect("clearing");
        assert_eq!(
            patch,
            TopicPatch {
                name: None,
                description: Some(None)
            }
        );
        assert!(TopicInput {
            name: Field::Null,
            ..TopicInput::default()
        }
        .parse_patch()
        .is_err());
    }
}
