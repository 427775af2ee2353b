//! Announcements: one template sent once to an audience.

use mailroom_domain::{AnnouncementId, ContactId, SegmentId, TemplateId, Timestamp, TopicId};

use super::ContactSearch;
use serde::{Deserialize, Serialize};

/// One condition on a contact attribute; an audience is the AND of its conditions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Condition {
    /// The attribute's slug (e.g. `plan`, `event.signed_up`), or an engagement slug
    /// (`engagement.sent`, `engagement.opened`, `engagement.clicked`, `engagement.bounced`).
    pub slug: String,
    /// The operator (`s_equal`, `exists`, `before`, …; `within_days` and
    /// `not_within_days` for engagement; see docs/api.md).
    pub operator: String,
    /// The operand; its type depends on the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
}

/// An announcement.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Announcement {
    /// The announcement's id.
    #[serde(rename = "_id")]
    pub id: AnnouncementId,
    /// Its name.
    pub name: String,
    /// The template it sends.
    pub template_id: TemplateId,
    /// The template's subject when it was made.
    pub subject: String,
    /// Whether contacts unsubscribed from everything receive it.
    pub include_unsubscribed: bool,
    /// The audience's conditions.
    pub attributes: Vec<serde_json::Value>,
    /// `scheduled`, `running`, `paused`, `completed`, `cancelled` or `failed`.
    pub status: String,
    /// When it was scheduled to start, if it was.
    #[serde(default)]
    pub send_at: Option<Timestamp>,
    /// The contacts it reaches.
    pub audience_size: u64,
    /// When it was created.
    pub create_date: Timestamp,
    /// The topic whose unsubscribers are skipped.
    #[serde(default)]
    pub topic_id: Option<TopicId>,
    /// The saved segment whose definition it copied when it was made.
    #[serde(default)]
    pub segment_id: Option<SegmentId>,
    /// When its messages were queued.
    #[serde(default)]
    pub process_date: Option<Timestamp>,
    /// Why it failed.
    #[serde(default)]
    pub failure_reason: Option<String>,
    /// The last contact sampled while queuing.
    #[serde(default)]
    pub last_sampled_contact_id: Option<ContactId>,
    /// Its messages by state (only from `get_announcement`).
    #[serde(default)]
    pub counters: Option<AnnouncementCounters>,
}

/// How many of an announcement's messages are in each state, with first opens and clicks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[allow(missing_docs)] // Each counter is named for the state it counts.
pub struct AnnouncementCounters {
    pub queued: u64,
    pub sending: u64,
    pub sent: u64,
    pub failed: u64,
    pub bounced: u64,
    pub skipped: u64,
    pub opened: u64,
    pub clicked: u64,
}

/// The body of `create_announcement`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewAnnouncement {
    /// Its name.
    pub name: String,
    /// The template to send.
    pub template_id: TemplateId,
    /// Who it reaches.
    #[serde(flatten)]
    pub audience: AnnouncementAudience,
    /// When to start (at most 366 days ahead); `None` starts it now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_at: Option<Timestamp>,
}

/// Who an announcement reaches: an audience given in the body, or a saved segment.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AnnouncementAudience {
    /// These conditions, unsubscription switch and topic (the body of `search_contacts`).
    Given(ContactSearch),
    /// A saved segment of the account: its definition is copied when the announcement is
    /// made, so changing the segment later does not change the announcement.
    Segment {
        /// The segment.
        #[serde(rename = "segmentId")]
        segment_id: SegmentId,
    },
}
