//! Automations: event-triggered sends. The endpoints arrive later; account creation stores
//! one sample automation with these types.

use crate::slug::EventSlug;

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
}

/// An automation to be stored; the template is named by slug until ids exist.
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
