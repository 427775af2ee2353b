//! Automations: a template sent when a contact event arrives.

use mailroom_domain::{AutomationId, TemplateId, Timestamp};
use serde::{Deserialize, Serialize};

/// An automation.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Automation {
    /// The automation's id.
    #[serde(rename = "_id")]
    pub id: AutomationId,
    /// Its name.
    pub name: String,
    /// The template it sends.
    pub template_id: TemplateId,
    /// The event that triggers it.
    pub trigger_event_slug: String,
    /// `once` or `everytime`.
    pub trigger_event_condition: String,
    /// `immediately` or `x_days_after`.
    pub timing_condition: String,
    /// Days to wait with `x_days_after`.
    #[serde(default)]
    pub timing_value: Option<u32>,
    /// Whether it fires.
    pub is_enabled: bool,
    /// When it was created.
    pub create_date: Timestamp,
}

/// An automation as listed, with a summary of its template.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AutomationListItem {
    /// The automation.
    #[serde(flatten)]
    pub automation: Automation,
    /// Its template (`None` only if it vanished).
    #[serde(default)]
    pub template: Option<AutomationTemplate>,
}

/// The template summary of a listed automation.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AutomationTemplate {
    /// The template's id.
    #[serde(rename = "_id")]
    pub id: TemplateId,
    /// Its name.
    pub name: String,
    /// Its slug.
    pub slug: String,
    /// Its subject.
    pub subject: String,
}

/// The body of `create_automation` and `update_automation` (which takes the whole
/// settings).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AutomationSettings {
    /// Its name.
    pub name: String,
    /// The template it sends.
    pub template_id: TemplateId,
    /// The event that triggers it (normalised to snake_case by the server).
    pub trigger_event_slug: String,
    /// `once` or `everytime`.
    pub trigger_event_condition: String,
    /// `immediately` or `x_days_after`.
    pub timing_condition: String,
    /// Days to wait: required with `x_days_after`, refused otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing_value: Option<u32>,
    /// Whether it fires.
    pub is_enabled: bool,
}
