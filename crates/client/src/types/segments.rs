//! Saved segments: named audiences an announcement can name instead of repeating them.

use mailroom_domain::{SegmentId, Timestamp, TopicId};
use serde::{Deserialize, Serialize};

use super::{Condition, ContactSearch, Patch};

/// A saved segment.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Segment {
    /// The segment's id.
    #[serde(rename = "_id")]
    pub id: SegmentId,
    /// Its name, unique in the account case-insensitively.
    pub name: String,
    /// Its conditions, combined with AND.
    pub attributes: Vec<Condition>,
    /// Whether contacts unsubscribed from everything belong.
    pub include_unsubscribed: bool,
    /// The topic whose unsubscribers are left out.
    #[serde(default)]
    pub topic_id: Option<TopicId>,
    /// When it was created.
    pub create_date: Timestamp,
    /// When its name or definition last changed.
    pub update_date: Timestamp,
}

/// The body of `create_segment`: a name and an audience, checked as `search_contacts`
/// checks it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NewSegment {
    /// Its name (1–200 characters).
    pub name: String,
    /// Who belongs.
    #[serde(flatten)]
    pub audience: ContactSearch,
}

/// The body of `update_segment`: each field set replaces the stored one.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SegmentUpdate {
    /// A new name.
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub name: Patch<String>,
    /// New conditions, replacing all of them.
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub attributes: Patch<Vec<Condition>>,
    /// Whether contacts unsubscribed from everything belong.
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub include_unsubscribed: Patch<bool>,
    /// A topic whose unsubscribers are left out, or [`Patch::Clear`].
    #[serde(skip_serializing_if = "Patch::is_keep")]
    pub topic_id: Patch<TopicId>,
}
