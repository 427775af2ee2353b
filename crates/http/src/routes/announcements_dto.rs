//! JSON shapes of announcements (the wire side of `mailroom_domain::announcement`).

use mailroom_domain::{
    announcement::{Announcement, AnnouncementCounters, AnnouncementInput},
    condition::ConditionInput,
    Timestamp,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::contacts_dto::ConditionBody;

/// Body of `POST …/announcements`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AnnouncementBody {
    /// Internal campaign name (required).
    pub name: Option<String>,
    /// Template to send (required).
    pub template_id: Option<String>,
    /// Contacts unsubscribed from this topic are skipped.
    pub topic_id: Option<String>,
    /// Send to contacts unsubscribed from everything too (required unless `segmentId`
    /// is given).
    pub include_unsubscribed: Option<bool>,
    /// Conditions combined with AND; omitted or empty reaches the whole audience.
    pub attributes: Option<Vec<ConditionBody>>,
    /// A saved segment of the account, instead of `attributes`, `includeUnsubscribed`
    /// and `topicId` (none of which may then be given): its definition is copied into
    /// the announcement now, so a later change of the segment does not change it.
    pub segment_id: Option<String>,
    /// When to start (RFC 3339, at most 366 days ahead): the announcement is `scheduled`
    /// until then, and its audience is the contacts created until then. Omitted, or a
    /// time up to a minute past, starts it now.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub send_at: Option<String>,
}

impl From<AnnouncementBody> for AnnouncementInput {
    fn from(body: AnnouncementBody) -> Self {
        Self {
            name: body.name,
            template_id: body.template_id,
            topic_id: body.topic_id,
            include_unsubscribed: body.include_unsubscribed,
            attributes: body.attributes.map(super::contacts::condition_inputs),
            segment_id: body.segment_id,
            send_at: body.send_at,
        }
    }
}

/// An announcement.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnnouncementDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// Internal name.
    pub name: String,
    /// The template it sends.
    pub template_id: String,
    /// The template's subject when the announcement was created.
    pub subject: String,
    /// The topic whose unsubscribers are left out; omitted when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic_id: Option<String>,
    /// Whether contacts unsubscribed from everything are included.
    pub include_unsubscribed: bool,
    /// The attribute conditions, as sent (or as the segment held them).
    #[schema(value_type = Vec<Object>)]
    pub attributes: Vec<serde_json::Value>,
    /// The saved segment whose definition was copied at creation; omitted when the body
    /// gave the audience itself. The segment may have changed or gone since.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segment_id: Option<String>,
    /// `scheduled`, `running`, `paused`, `completed`, `cancelled` or `failed`.
    pub status: &'static str,
    /// When it was scheduled to start; omitted when it started at its creation.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub send_at: Option<Timestamp>,
    /// When it became `completed`, `cancelled` or `failed`; `null` before.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub process_date: Option<Timestamp>,
    /// The last contact the audience expansion reached; omitted before the first batch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_sampled_contact_id: Option<String>,
    /// Messages queued by the expansion so far.
    pub audience_size: u64,
    /// Why it failed; present only when `failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// Creation time.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
    /// Its messages by state, with first opens and clicks; on
    /// `GET …/announcements/{announcementId}` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counters: Option<AnnouncementCountersDto>,
}

/// How many of an announcement's messages are in each state (kept as the messages
/// change, so reading them costs the same at any audience size).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnnouncementCountersDto {
    /// Waiting to be sent, retries included.
    pub queued: u64,
    /// Being sent by a worker now.
    pub sending: u64,
    /// Accepted by the recipient's server.
    pub sent: u64,
    /// Given up on.
    pub failed: u64,
    /// Hard-bounced (at send time or reported later).
    pub bounced: u64,
    /// Not sent by rule (suppression, unsubscription, send limit, no mail server) or
    /// because the announcement was cancelled.
    pub skipped: u64,
    /// Opened at least once (open tracking).
    pub opened: u64,
    /// Clicked at least once (click tracking).
    pub clicked: u64,
}

impl From<AnnouncementCounters> for AnnouncementCountersDto {
    fn from(counters: AnnouncementCounters) -> Self {
        Self {
            queued: counters.queued,
            sending: counters.sending,
            sent: counters.sent,
            failed: counters.failed,
            bounced: counters.bounced,
            skipped: counters.skipped,
            opened: counters.opened,
            clicked: counters.clicked,
        }
    }
}

impl From<Announcement> for AnnouncementDto {
    fn from(announcement: Announcement) -> Self {
        Self {
            id: announcement.id.to_string(),
            name: announcement.name,
            template_id: announcement.template_id.to_string(),
            subject: announcement.subject,
            topic_id: announcement.topic_id.map(|id| id.to_string()),
            include_unsubscribed: announcement.include_unsubscribed,
            attributes: announcement
                .attributes
                .iter()
                .map(ConditionInput::to_json)
                .collect(),
            segment_id: announcement.segment_id.map(|id| id.to_string()),
            status: announcement.status.as_str(),
            send_at: announcement.send_at,
            process_date: announcement.process_date,
            last_sampled_contact_id: announcement
                .last_sampled_contact_id
                .map(|id| id.to_string()),
            audience_size: announcement.audience_size,
            failure_reason: announcement.failure_reason,
            create_date: announcement.created_at,
            counters: None,
        }
    }
}
