//! Request and response shapes of automations and announcements (the wire side of
//! `mailroom_domain::{automation, announcement}`).

use mailroom_domain::{
    announcement::{Announcement, AnnouncementInput},
    automation::{Automation, AutomationInput},
    condition::ConditionInput,
    template::Template,
    Timestamp,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::dto::ConditionBody;

/// Body of `POST` and `PATCH …/automations`: the same complete body for both.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AutomationBody {
    /// Name (required).
    pub name: Option<String>,
    /// The template it sends (required).
    pub template_id: Option<String>,
    /// The contact event that triggers it, normalised to snake_case (required).
    pub trigger_event_slug: Option<String>,
    /// `once` or `everytime` (required; only `once` with `x_days_after`).
    pub trigger_event_condition: Option<String>,
    /// `immediately` or `x_days_after` (required).
    pub timing_condition: Option<String>,
    /// Whole days to wait: required with `x_days_after`, refused otherwise.
    #[schema(value_type = Option<u16>)]
    pub timing_value: Option<serde_json::Value>,
    /// Whether it fires (required).
    pub is_enabled: Option<bool>,
}

impl From<AutomationBody> for AutomationInput {
    fn from(body: AutomationBody) -> Self {
        Self {
            name: body.name,
            template_id: body.template_id,
            trigger_event_slug: body.trigger_event_slug,
            trigger_event_condition: body.trigger_event_condition,
            timing_condition: body.timing_condition,
            timing_value: body.timing_value,
            is_enabled: body.is_enabled,
        }
    }
}

/// An automation.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutomationDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// Name.
    pub name: String,
    /// The template it sends.
    pub template_id: String,
    /// The triggering event.
    pub trigger_event_slug: String,
    /// `once` or `everytime`.
    pub trigger_event_condition: &'static str,
    /// `immediately` or `x_days_after`.
    pub timing_condition: &'static str,
    /// Whole days to wait; present only with `x_days_after`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing_value: Option<u16>,
    /// Whether it fires.
    pub is_enabled: bool,
    /// Creation time.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
}

impl From<Automation> for AutomationDto {
    fn from(automation: Automation) -> Self {
        Self {
            id: automation.id.to_string(),
            name: automation.settings.name,
            template_id: automation.template_id.to_string(),
            trigger_event_slug: automation.settings.trigger_event_slug.as_str().to_owned(),
            trigger_event_condition: automation.settings.trigger_condition.as_str(),
            timing_condition: automation.settings.timing.condition(),
            timing_value: automation.settings.timing.value(),
            is_enabled: automation.settings.is_enabled,
            create_date: automation.created_at,
        }
    }
}

/// The template an automation of the list sends.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutomationTemplateDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// Name.
    pub name: String,
    /// Slug.
    pub slug: String,
    /// Subject.
    pub subject: String,
}

/// An automation of the list, joined with its template.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutomationListItemDto {
    /// The automation's fields.
    #[serde(flatten)]
    pub automation: AutomationDto,
    /// The template it sends (`null` only if it vanished).
    pub template: Option<AutomationTemplateDto>,
}

impl From<(Automation, Option<Template>)> for AutomationListItemDto {
    fn from((automation, template): (Automation, Option<Template>)) -> Self {
        Self {
            automation: automation.into(),
            template: template.map(|template| AutomationTemplateDto {
                id: template.id.to_string(),
                name: template.name,
                slug: template.slug.as_str().to_owned(),
                subject: template.subject,
            }),
        }
    }
}

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
    /// Send to contacts unsubscribed from everything too (required).
    pub include_unsubscribed: Option<bool>,
    /// Conditions combined with AND; omitted or empty reaches the whole audience.
    pub attributes: Option<Vec<ConditionBody>>,
}

impl From<AnnouncementBody> for AnnouncementInput {
    fn from(body: AnnouncementBody) -> Self {
        Self {
            name: body.name,
            template_id: body.template_id,
            topic_id: body.topic_id,
            include_unsubscribed: body.include_unsubscribed,
            attributes: body
                .attributes
                .unwrap_or_default()
                .into_iter()
                .map(|condition| ConditionInput {
                    slug: condition.slug,
                    operator: condition.operator,
                    value: condition.value,
                })
                .collect(),
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
    /// The attribute conditions, as sent.
    #[schema(value_type = Vec<Object>)]
    pub attributes: Vec<serde_json::Value>,
    /// `running`, `completed` or `failed`.
    pub status: &'static str,
    /// When it became `completed` or `failed`; `null` while running.
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
            status: announcement.status.as_str(),
            process_date: announcement.process_date,
            last_sampled_contact_id: announcement
                .last_sampled_contact_id
                .map(|id| id.to_string()),
            audience_size: announcement.audience_size,
            failure_reason: announcement.failure_reason,
            create_date: announcement.created_at,
        }
    }
}
