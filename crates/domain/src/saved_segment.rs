//! Saved segments: a named audience definition of an account, which an announcement can
//! name (`segmentId`) instead of repeating the conditions. The definition is what
//! `POST …/contacts/search` takes, validated the same way; an announcement copies it at
//! creation, so a later change of the segment leaves announcements already made alone.

use crate::{
    account::bounded_name, condition::AudienceDefinition, condition::ConditionInput, patch::Field,
    SegmentId, Timestamp, TopicId, ValidationErrors,
};

/// The longest segment name, in characters (after trimming).
pub const MAX_SEGMENT_NAME: usize = 200;

/// The most segments an account holds.
pub const MAX_SEGMENTS: u64 = 1_000;

/// A stored segment.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedSegment {
    /// Id.
    pub id: SegmentId,
    /// Name, unique in the account case-insensitively.
    pub name: String,
    /// Who belongs.
    pub definition: AudienceDefinition,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change of name or definition.
    pub updated_at: Timestamp,
}

/// A segment name as received.
///
/// # Errors
/// Under `name`: missing, empty after trimming, or longer than [`MAX_SEGMENT_NAME`].
pub fn parse_segment_name(name: Option<&str>) -> Result<String, ValidationErrors> {
    let mut errors = ValidationErrors::new();
    let name = errors.required_name("name", name, MAX_SEGMENT_NAME);
    errors.into_result()?;
    name.ok_or_else(|| ValidationErrors::single("name", "is required"))
}

/// A partial update as received: each field absent, `null` or a value. The definition's
/// fields are applied one by one onto the stored definition, and the result is checked
/// as a whole by the use case.
#[derive(Debug, Clone, Default)]
pub struct SegmentPatchInput {
    /// `name`; `null` is refused.
    pub name: Field<String>,
    /// `attributes`, replacing every condition; `null` is refused.
    pub attributes: Field<Vec<ConditionInput>>,
    /// `includeUnsubscribed`; `null` is refused.
    pub include_unsubscribed: Field<bool>,
    /// `topicId`; `null` clears it. A value that is no id is refused by the edge.
    pub topic: Field<TopicId>,
}

/// A parsed update.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SegmentPatch {
    /// New name.
    pub name: Option<String>,
    /// New conditions.
    pub attributes: Option<Vec<ConditionInput>>,
    /// New `includeUnsubscribed`.
    pub include_unsubscribed: Option<bool>,
    /// Set or clear the topic.
    pub topic: Option<Option<TopicId>>,
}

impl SegmentPatchInput {
    /// Checks the fields' shape; an update that changes nothing is refused.
    ///
    /// # Errors
    /// Every problem, each under its field.
    pub fn parse(self) -> Result<SegmentPatch, ValidationErrors> {
        let mut errors = ValidationErrors::new();
        let name = self
            .name
            .not_null("name", &mut errors)
            .and_then(|name| errors.collect("name", bounded_name(&name, MAX_SEGMENT_NAME)));
        let attributes = self.attributes.not_null("attributes", &mut errors);
        if let Some(attributes) = &attributes {
            if let Err(too_many) = crate::condition::check_condition_count(attributes) {
                errors.0.extend(too_many.0);
            }
        }
        let include_unsubscribed = self
            .include_unsubscribed
            .not_null("includeUnsubscribed", &mut errors);
        let topic = match self.topic {
            Field::Absent => None,
            Field::Null => Some(None),
            Field::Value(topic) => Some(Some(topic)),
        };
        errors.into_result()?;
        let patch = SegmentPatch {
            name,
            attributes,
            include_unsubscribed,
            topic,
        };
        if patch == SegmentPatch::default() {
            return Err(ValidationErrors::single(
                "body",
                "must change name, attributes, includeUnsubscribed or topicId",
            ));
        }
        Ok(patch)
    }
}

impl SegmentPatch {
    /// Whether the definition changes (and must be checked again).
    pub fn changes_definition(&self) -> bool {
        self.attributes.is_some() || self.include_unsubscribed.is_some() || self.topic.is_some()
    }

    /// Applies the patch; `now` becomes `updated_at`.
    pub fn apply(self, segment: &mut SavedSegment, now: Timestamp) {
        if let Some(name) = self.name {
            segment.name = name;
        }
        if let Some(attributes) = self.attributes {
            segment.definition.attributes = attributes;
        }
        if let Some(include_unsubscribed) = self.include_unsubscribed {
            segment.definition.include_unsubscribed = include_unsubscribed;
        }
        if let Some(topic) = self.topic {
            segment.definition.topic = topic;
        }
        segment.updated_at = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(errors: ValidationErrors) -> Vec<String> {
        errors.0.into_iter().map(|error| error.field).collect()
    }

    #[test]
    fn a_name_is_required_trimmed_and_bounded() {
        assert_eq!(parse_segment_name(Some("  Pros ")).expect("name"), "Pros");
        for bad in [None, Some(""), Some("   ")] {
            assert_eq!(fields(parse_segment_name(bad).expect_err("bad")), ["name"]);
        }
        let long = "x".repeat(MAX_SEGMENT_NAME + 1);
        assert_eq!(
            fields(parse_segment_name(Some(&long)).expect_err("long")),
            ["name"]
        );
        let longest = "é".repeat(MAX_SEGMENT_NAME);
        assert!(parse_segment_name(Some(&longest)).is_ok());
    }

    #[test]
    fn a_patch_refuses_nulls_and_nothing_and_clears_the_topic() {
        let input = SegmentPatchInput {
            name: Field::Null,
            attributes: Field::Null,
            include_unsubscribed: Field::Null,
            topic: Field::Absent,
        };
        assert_eq!(
            fields(input.parse().expect_err("nulls")),
            ["name", "attributes", "includeUnsubscribed"]
        );
        assert_eq!(
            fields(SegmentPatchInput::default().parse().expect_err("empty")),
            ["body"]
        );
        let clear = SegmentPatchInput {
            topic: Field::Null,
            ..SegmentPatchInput::default()
        }
        .parse()
        .expect("clears");
        assert_eq!(clear.topic, Some(None));
        assert!(clear.changes_definition());
        let rename = SegmentPatchInput {
            name: Field::Value("New".into()),
            ..SegmentPatchInput::default()
        }
        .parse()
        .expect("renames");
        assert!(!rename.changes_definition());
    }
}
