//! JSON shapes of automations (the wire side of `mailroom_domain::automation`).

use mailroom_domain::{
    automation::{Automation, AutomationInput},
    template::Template,
    Timestamp,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

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
