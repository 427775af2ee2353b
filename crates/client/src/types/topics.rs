//! Announcement topics (what contacts may unsubscribe from one by one).

use mailroom_domain::{Timestamp, TopicId};
use serde::{Deserialize, Serialize};

use super::Patch;

/// A topic.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Topic {
    /// The topic's id.
    #[serde(rename = "_id")]
    pub id: TopicId,
    /// Its name.
    pub name: String,
    /// Its description.
    #[serde(default)]
    pub description: Option<String>,
    /// When it was created.
    pub create_date: Timestamp,
}

/// The body of `create_topic`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NewTopic {
    /// Its name (required).
    pub name: String,
    /// Its description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The body of `update_topic`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TopicUpdate {
    /// A new name.
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub name: Patch<String>,
    /// A new description, or [`Patch::Clear`].
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub description: Patch<String>,
}
