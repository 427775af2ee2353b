//! JSON shapes of topics, and their conversion from domain values. Field
//! names follow the API specification (camelCase, `_id`).

use mailroom_domain::{patch::Field, Timestamp};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Body of topic create and PATCH.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TopicBody {
    /// Name (required on create).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub name: Field<String>,
    /// Description; null clears.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub description: Field<String>,
}

impl From<TopicBody> for mailroom_domain::topic::TopicInput {
    fn from(body: TopicBody) -> Self {
        Self {
            name: body.name,
            description: body.description,
        }
    }
}

/// An announcement topic.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// Name.
    pub name: String,
    /// Description, omitted when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Creation time.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
}

impl From<mailroom_domain::topic::Topic> for TopicDto {
    fn from(topic: mailroom_domain::topic::Topic) -> Self {
        Self {
            id: topic.id.to_string(),
            name: topic.name,
            description: topic.description,
            create_date: topic.created_at,
        }
    }
}
