//! JSON shapes of saved segments (the wire side of `mailroom_domain::saved_segment`).

use mailroom_domain::{
    condition::ConditionInput, patch::Field, saved_segment::SavedSegment, Timestamp,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::contacts_dto::{ConditionBody, SearchBody};

/// Body of `POST …/segments`: a name and the body of `POST …/contacts/search`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NewSegmentBody {
    /// 1–200 characters, unused in the account (case-insensitively); required.
    pub name: Option<String>,
    /// Conditions combined with AND; omitted or empty is everyone.
    pub attributes: Option<Vec<ConditionBody>>,
    /// Whether contacts unsubscribed from everything belong (required).
    pub include_unsubscribed: Option<bool>,
    /// Leave out contacts unsubscribed from this topic.
    pub topic_id: Option<String>,
}

impl NewSegmentBody {
    /// The name, and the definition as a search body.
    pub(super) fn split(self) -> (Option<String>, SearchBody) {
        (
            self.name,
            SearchBody {
                attributes: self.attributes,
                include_unsubscribed: self.include_unsubscribed,
                topic_id: self.topic_id,
            },
        )
    }
}

/// Body of `PATCH …/segments/{segmentId}`: each field given replaces the stored one.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SegmentPatchBody {
    /// A new name; `null` is refused.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub name: Field<String>,
    /// New conditions, replacing all of them; `null` is refused, `[]` is everyone.
    #[serde(default)]
    #[schema(value_type = Option<Vec<ConditionBody>>)]
    pub attributes: Field<Vec<ConditionBody>>,
    /// `null` is refused.
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub include_unsubscribed: Field<bool>,
    /// A topic whose unsubscribers are left out; `null` clears it.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub topic_id: Field<String>,
}

/// A saved segment.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SegmentDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// Name.
    pub name: String,
    /// The conditions, as sent.
    #[schema(value_type = Vec<Object>)]
    pub attributes: Vec<serde_json::Value>,
    /// Whether contacts unsubscribed from everything belong.
    pub include_unsubscribed: bool,
    /// The topic whose unsubscribers are left out; omitted when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic_id: Option<String>,
    /// Creation time.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
    /// Time of the last change.
    #[schema(value_type = String, format = DateTime)]
    pub update_date: Timestamp,
}

impl From<SavedSegment> for SegmentDto {
    fn from(segment: SavedSegment) -> Self {
        Self {
            id: segment.id.to_string(),
            name: segment.name,
            attributes: segment
                .definition
                .attributes
                .iter()
                .map(ConditionInput::to_json)
                .collect(),
            include_unsubscribed: segment.definition.include_unsubscribed,
            topic_id: segment.definition.topic.map(|id| id.to_string()),
            create_date: segment.created_at,
            update_date: segment.updated_at,
        }
    }
}
