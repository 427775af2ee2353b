//! Automations: a template sent when a contact records a matching event (docs/design.md#9-automations-and-announcements).
//!
//! The rules of the body live here: `POST` and `PATCH` take the same complete body
//! ([`AutomationInput::parse`]), `timingValue` belongs to `x_days_after` only, and a delayed
//! automation fires `once` only. When an automation fires is decided by [`Automation::fires`]
//! and [`Timing::due_at`].

use serde_json::Value;

use crate::{slug::EventSlug, AutomationId, TemplateId, Timestamp, ValidationErrors};

/// The longest name accepted, in characters.
pub const MAX_NAME_CHARS: usize = 200;
/// The longest delay accepted, in days (ten years).
pub const MAX_DAYS_AFTER: u16 = 3650;

/// Whether an automation fires on the first matching event only or on every one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerCondition {
    /// At most once per contact, ever.
    Once,
    /// On every matching event.
    Everytime,
}

impl TriggerCondition {
    /// The wire and stored name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Once => "once",
            Self::Everytime => "everytime",
        }
    }

    /// The condition named `text`, if any.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::Once, Self::Everytime]
            .into_iter()
            .find(|condition| condition.as_str() == text)
    }
}

/// When the message goes out relative to the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// As soon as a worker picks it up.
    Immediately,
    /// This many whole days after the event.
    DaysAfter(u16),
}

impl Timing {
    /// The wire and stored name of the condition (`immediately`, `x_days_after`).
    pub fn condition(&self) -> &'static str {
        match self {
            Self::Immediately => "immediately",
            Self::DaysAfter(_) => "x_days_after",
        }
    }

    /// The `timingValue`, present only for `x_days_after`.
    pub fn value(&self) -> Option<u16> {
        match self {
            Self::Immediately => None,
            Self::DaysAfter(days) => Some(*days),
        }
    }

    /// The timing stored as `condition` and `value`, if they make one.
    pub fn from_parts(condition: &str, value: Option<u16>) -> Option<Self> {
        match (condition, value) {
            ("immediately", None) => Some(Self::Immediately),
            ("x_days_after", Some(days)) if (1..=MAX_DAYS_AFTER).contains(&days) => {
                Some(Self::DaysAfter(days))
            }
            _ => None,
        }
    }

    /// When the message of an event that happened at `event_time` is due.
    pub fn due_at(&self, event_time: Timestamp) -> Timestamp {
        match self {
            Self::Immediately => event_time,
            Self::DaysAfter(days) => event_time.plus(time::Duration::days(i64::from(*days))),
        }
    }
}

/// What an automation does, without its identity: the part the body sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAutomation {
    /// Its name.
    pub name: String,
    /// The event that triggers it.
    pub trigger_event_slug: EventSlug,
    /// Once or every time.
    pub trigger_condition: TriggerCondition,
    /// When to send.
    pub timing: Timing,
    /// Whether it fires.
    pub is_enabled: bool,
}

/// A validated body of `POST` or `PATCH …/automations`: the settings and the template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutomationDefinition {
    /// The template it sends (its existence is checked by the use case).
    pub template_id: TemplateId,
    /// Everything else.
    pub settings: NewAutomation,
}

/// A stored automation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Automation {
    /// Id.
    pub id: AutomationId,
    /// The template it sends.
    pub template_id: TemplateId,
    /// Name, trigger, timing, enabled flag.
    pub settings: NewAutomation,
    /// Created.
    pub created_at: Timestamp,
}

impl Automation {
    /// Whether an event named `slug` makes this automation fire (before the `once` rule,
    /// which needs the contact's history and is kept by the store).
    pub fn fires(&self, slug: &EventSlug) -> bool {
        self.settings.is_enabled && &self.settings.trigger_event_slug == slug
    }
}

/// The body of `POST` and `PATCH …/automations` as received: every field is required
/// except `timingValue`, which `x_days_after` requires and the other timing refuses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AutomationInput {
    /// `name`.
    pub name: Option<String>,
    /// `templateId`.
    pub template_id: Option<String>,
    /// `triggerEventSlug`, normalised like event slugs.
    pub trigger_event_slug: Option<String>,
    /// `triggerEventCondition`: `once` or `everytime`.
    pub trigger_event_condition: Option<String>,
    /// `timingCondition`: `immediately` or `x_days_after`.
    pub timing_condition: Option<String>,
    /// `timingValue`, kept as JSON so a fraction or a string is reported, not coerced.
    /// `null` counts as omitted.
    pub timing_value: Option<Value>,
    /// `isEnabled`.
    pub is_enabled: Option<bool>,
}

impl AutomationInput {
    /// Parses a complete body.
    ///
    /// # Errors
    /// Every problem, each under its field.
    pub fn parse(self) -> Result<AutomationDefinition, ValidationErrors> {
        let mut errors = ValidationErrors::new();
        let name = errors.required_name("name", self.name.as_deref(), MAX_NAME_CHARS);
        let template_id = errors.required_id("templateId", self.template_id.as_deref(), "template");
        let trigger_event_slug = match self.trigger_event_slug.as_deref() {
            None => {
                errors.push("triggerEventSlug", "is required");
                None
            }
            Some(text) => errors.collect("triggerEventSlug", EventSlug::normalize(text)),
        };
        let trigger_condition = match self.trigger_event_condition.as_deref() {
            None => {
                errors.push("triggerEventCondition", "is required");
                None
            }
            Some(text) => {
                let parsed = TriggerCondition::parse(text);
                if parsed.is_none() {
                    errors.push("triggerEventCondition", "must be once or everytime");
                }
                parsed
            }
        };
        let timing_value = self.timing_value.filter(|value| !value.is_null());
        let timing = match self.timing_condition.as_deref() {
            None => {
                errors.push("timingCondition", "is required");
                None
            }
            Some("immediately") => {
                if timing_value.is_some() {
                    errors.push(
                        "timingValue",
                        "must be omitted unless timingCondition is x_days_after",
                    );
                }
                Some(Timing::Immediately)
            }
            Some("x_days_after") => {
                if trigger_condition == Some(TriggerCondition::Everytime) {
                    errors.push(
                        "triggerEventCondition",
                        "only once is accepted when timingCondition is x_days_after",
                    );
                }
                match timing_value {
                    None => {
                        errors.push(
                            "timingValue",
                            "is required when timingCondition is x_days_after",
                        );
                        None
                    }
                    Some(value) => match days(&value) {
                        Some(days) => Some(Timing::DaysAfter(days)),
                        None => {
                            errors.push(
                                "timingValue",
                                format!(
                                    "must be a whole number of days from 1 to {MAX_DAYS_AFTER}"
                                ),
                            );
                            None
                        }
                    },
                }
            }
            Some(_) => {
                errors.push("timingCondition", "must be immediately or x_days_after");
                None
            }
        };
        let is_enabled = self.is_enabled;
        if is_enabled.is_none() {
            errors.push("isEnabled", "is required");
        }
        errors.into_result()?;
        match (
            name,
            template_id,
            trigger_event_slug,
            trigger_condition,
            timing,
            is_enabled,
        ) {
            (
                Some(name),
                Some(template_id),
                Some(trigger_event_slug),
                Some(trigger_condition),
                Some(timing),
                Some(is_enabled),
            ) => Ok(AutomationDefinition {
                template_id,
                settings: NewAutomation {
                    name,
                    trigger_event_slug,
                    trigger_condition,
                    timing,
                    is_enabled,
                },
            }),
            _ => Err(ValidationErrors::single("body", "is incomplete")),
        }
    }
}

/// A whole number of days in range, from a JSON number (`3` or `3.0`, not `3.5`).
fn days(value: &Value) -> Option<u16> {
    let number = value.as_number()?;
    let whole = match number.as_u64() {
        Some(whole) => whole,
        None => {
            let float = number.as_f64()?;
            if float.fract() != 0.0 || float < 1.0 {
                return None;
            }
            // In range after the check below; a float this side of 2^53 is exact.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let whole = float as u64;
            whole
        }
    };
    u16::try_from(whole)
        .ok()
        .filter(|days| (1..=MAX_DAYS_AFTER).contains(days))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn valid() -> AutomationInput {
        AutomationInput {
            name: Some("Welcome".into()),
            template_id: Some("01936c5e-7b2a-7cde-8f00-0123456789ab".into()),
            trigger_event_slug: Some("Signed Up".into()),
            trigger_event_condition: Some("once".into()),
            timing_condition: Some("immediately".into()),
            timing_value: None,
            is_enabled: Some(true),
        }
    }

    fn fields(input: AutomationInput) -> Vec<String> {
        input
            .parse()
            .expect_err("invalid")
            .0
            .into_iter()
            .map(|error| error.field)
            .collect()
    }

    #[test]
    fn a_complete_body_parses_and_normalises_the_slug() {
        let parsed = valid().parse().expect("valid");
        assert_eq!(parsed.settings.trigger_event_slug.as_str(), "signed_up");
        assert_eq!(parsed.settings.timing, Timing::Immediately);
        assert!(parsed.settings.is_enabled);
    }

    #[test]
    fn every_missing_field_is_named() {
        assert_eq!(
            fields(AutomationInput::default()),
            [
                "name",
                "templateId",
                "triggerEventSlug",
                "triggerEventCondition",
                "timingCondition",
                "isEnabled"
            ]
        );
    }

    #[test]
    fn days_after_needs_a_positive_whole_timing_value() {
        let mut input = valid();
        input.timing_condition = Some("x_days_after".into());
        assert_eq!(fields(input.clone()), ["timingValue"]);
        for bad in [
            json!(0),
            json!(-1),
            json!(1.5),
            json!("3"),
            json!(3651),
            json!(true),
        ] {
            input.timing_value = Some(bad.clone());
            assert_eq!(fields(input.clone()), ["timingValue"], "{bad}");
        }
        input.timing_value = Some(json!(3));
        assert_eq!(
            input.clone().parse().expect("valid").settings.timing,
            Timing::DaysAfter(3)
        );
        input.timing_value = Some(json!(7.0));
        assert_eq!(
            input.parse().expect("valid").settings.timing,
            Timing::DaysAfter(7)
        );
    }

    #[test]
    fn days_after_accepts_only_once() {
        let mut input = valid();
        input.timing_condition = Some("x_days_after".into());
        input.timing_value = Some(json!(2));
        input.trigger_event_condition = Some("everytime".into());
        assert_eq!(fields(input), ["triggerEventCondition"]);
    }

    #[test]
    fn immediately_refuses_a_timing_value_but_not_null() {
        let mut input = valid();
        input.timing_value = Some(json!(2));
        assert_eq!(fields(input.clone()), ["timingValue"]);
        input.timing_value = Some(Value::Null);
        assert!(input.parse().is_ok());
    }

    #[test]
    fn bad_enumerations_and_ids_are_named() {
        let mut input = valid();
        input.trigger_event_condition = Some("sometimes".into());
        input.timing_condition = Some("later".into());
        input.template_id = Some("nope".into());
        input.trigger_event_slug = Some("!!!".into());
        input.name = Some("  ".into());
        assert_eq!(
            fields(input),
            [
                "name",
                "templateId",
                "triggerEventSlug",
                "triggerEventCondition",
                "timingCondition"
            ]
        );
    }

    #[test]
    fn due_time_moves_by_whole_days() {
        let now = Timestamp::parse("2026-11-22T10:00:00.000Z").expect("time");
        assert_eq!(Timing::Immediately.due_at(now), now);
        assert_eq!(
            Timing::DaysAfter(2).due_at(now).to_string(),
            "2026-11-24T10:00:00.000Z"
        );
    }

    #[test]
    fn stored_parts_round_trip() {
        for timing in [Timing::Immediately, Timing::DaysAfter(5)] {
            assert_eq!(
                Timing::from_parts(timing.condition(), timing.value()),
                Some(timing)
            );
        }
        assert_eq!(Timing::from_parts("x_days_after", None), None);
    }
}
