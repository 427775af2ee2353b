//! Engagement conditions: what happened to a contact's messages lately.
//!
//! They travel in the same `attributes` list as attribute conditions, under four reserved
//! slugs (`engagement.sent`, `engagement.opened`, `engagement.clicked`,
//! `engagement.bounced`) with two operators: `within_days` (it happened in the last N days)
//! and `not_within_days` (it did not). The value is the number of days, 1 to 3650, for any
//! message of the contact, or `{"days": N, "announcementId": "…"}` /
//! `{"days": N, "templateId": "…"}` for the messages of one announcement or template.
//!
//! The window ends at the segment's reference time (a search's request time, an
//! announcement's creation) and is read as "at or after `since`". Only real messages
//! count: test sends are not the contact's messages.

use serde_json::{Map, Value};
use time::Duration;

use crate::{AnnouncementId, TemplateId, Timestamp};

/// What happened to a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Activity {
    /// The mail server accepted it (`sent_at`; a later bounce does not undo that).
    Sent,
    /// Its first open was recorded.
    Opened,
    /// Its first click was recorded.
    Clicked,
    /// It bounced (at delivery, or by a later report about a sent message).
    Bounced,
}

impl Activity {
    /// Every activity, in the order the console lists them.
    pub const ALL: [Self; 4] = [Self::Sent, Self::Opened, Self::Clicked, Self::Bounced];

    /// The reserved slug naming it in a condition.
    pub fn slug(self) -> &'static str {
        match self {
            Self::Sent => "engagement.sent",
            Self::Opened => "engagement.opened",
            Self::Clicked => "engagement.clicked",
            Self::Bounced => "engagement.bounced",
        }
    }

    /// The activity a reserved slug names.
    pub fn from_slug(slug: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|activity| activity.slug() == slug)
    }
}

/// Whose messages an engagement condition looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EngagementScope {
    /// Any message of the contact.
    AnyMessage,
    /// The contact's message of one announcement.
    Announcement(AnnouncementId),
    /// The contact's messages of one template.
    Template(TemplateId),
}

/// What every engagement slug starts with: a namespace no attribute slug can take.
pub const SLUG_PREFIX: &str = "engagement.";

/// The operators of engagement conditions, beside [`super::OPERATORS`].
pub const ENGAGEMENT_OPERATORS: [&str; 2] = ["within_days", "not_within_days"];

/// The longest window, in days: about ten years, far beyond any message kept.
pub const MAX_ENGAGEMENT_DAYS: u16 = 3650;

/// What a contact's message shows, as the evaluator reads it: one per message, test sends
/// left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageActivity {
    /// The announcement it belongs to, if any.
    pub announcement: Option<AnnouncementId>,
    /// The template it was rendered from.
    pub template: TemplateId,
    /// When the mail server accepted it.
    pub sent_at: Option<Timestamp>,
    /// Its first open.
    pub opened_at: Option<Timestamp>,
    /// Its first click.
    pub clicked_at: Option<Timestamp>,
    /// When its bounce was recorded.
    pub bounced_at: Option<Timestamp>,
}

impl MessageActivity {
    fn at(&self, activity: Activity) -> Option<Timestamp> {
        match activity {
            Activity::Sent => self.sent_at,
            Activity::Opened => self.opened_at,
            Activity::Clicked => self.clicked_at,
            Activity::Bounced => self.bounced_at,
        }
    }

    fn in_scope(&self, scope: EngagementScope) -> bool {
        match scope {
            EngagementScope::AnyMessage => true,
            EngagementScope::Announcement(id) => self.announcement == Some(id),
            EngagementScope::Template(id) => self.template == id,
        }
    }
}

/// A parsed engagement condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Engagement {
    /// What must (or must not) have happened.
    pub activity: Activity,
    /// `within_days` (true) or `not_within_days` (false).
    pub happened: bool,
    /// The window's length as given.
    pub days: u16,
    /// Whose messages count.
    pub scope: EngagementScope,
    /// The window's start: the reference time minus `days` days.
    pub since: Timestamp,
}

impl Engagement {
    /// Parses the operator and value of a condition on `activity`'s slug, the window
    /// ending at `as_of`. The error names the field (`operator` or `value`) and the problem.
    pub(super) fn parse(
        activity: Activity,
        operator: &str,
        value: Option<&Value>,
        as_of: Timestamp,
    ) -> Result<Self, (&'static str, String)> {
        let happened = match operator {
            "within_days" => true,
            "not_within_days" => false,
            other => {
                return Err((
                    "operator",
                    format!(
                        "'{other}' does not apply to '{}', an engagement condition; allowed: {}",
                        activity.slug(),
                        ENGAGEMENT_OPERATORS.join(", ")
                    ),
                ))
            }
        };
        let (days, scope) = parse_window(value).map_err(|message| ("value", message))?;
        Ok(Self {
            activity,
            happened,
            days,
            scope,
            since: as_of.plus(-Duration::days(i64::from(days))),
        })
    }

    /// The operator's wire name.
    pub fn operator_name(&self) -> &'static str {
        if self.happened {
            ENGAGEMENT_OPERATORS[0]
        } else {
            ENGAGEMENT_OPERATORS[1]
        }
    }

    /// The value in its wire shape: the number of days, or the object naming the scope.
    pub fn value(&self) -> Value {
        let days = Value::from(self.days);
        let (field, id) = match self.scope {
            EngagementScope::AnyMessage => return days,
            EngagementScope::Announcement(id) => ("announcementId", id.to_string()),
            EngagementScope::Template(id) => ("templateId", id.to_string()),
        };
        let mut object = Map::new();
        object.insert("days".into(), days);
        object.insert(field.into(), Value::String(id));
        Value::Object(object)
    }

    /// Whether the contact whose messages are `messages` satisfies the condition: one of
    /// them in scope shows the activity at or after `since` (or, for `not_within_days`,
    /// none does).
    pub fn matches(&self, messages: &[MessageActivity]) -> bool {
        let happened = messages.iter().any(|message| {
            message.in_scope(self.scope)
                && message
                    .at(self.activity)
                    .is_some_and(|at| at.as_datetime() >= self.since.as_datetime())
        });
        happened == self.happened
    }
}

/// Reads `N` or `{"days": N, "announcementId" | "templateId": id}`.
fn parse_window(value: Option<&Value>) -> Result<(u16, EngagementScope), String> {
    const SHAPE: &str = "takes a number of days (1 to 3650), or {\"days\": N} with \
                         \"announcementId\" or \"templateId\"";
    let days_of = |value: Option<&Value>| -> Result<u16, String> {
        value
            .and_then(Value::as_u64)
            .and_then(|days| u16::try_from(days).ok())
            .filter(|days| (1..=MAX_ENGAGEMENT_DAYS).contains(days))
            .ok_or_else(|| {
                format!("the number of days must be a whole number from 1 to {MAX_ENGAGEMENT_DAYS}")
            })
    };
    match value {
        Some(Value::Number(_)) => Ok((days_of(value)?, EngagementScope::AnyMessage)),
        Some(Value::Object(object)) => {
            if let Some(unknown) = object
                .keys()
                .find(|key| !["days", "announcementId", "templateId"].contains(&key.as_str()))
            {
                return Err(format!("unknown field '{unknown}': the value {SHAPE}"));
            }
            let days = days_of(object.get("days"))?;
            let id = |field: &str| -> Result<Option<crate::Uuid>, String> {
                object
                    .get(field)
                    .map(|id| {
                        id.as_str()
                            .filter(|text| text.len() == 36)
                            .and_then(|text| crate::Uuid::try_parse(text).ok())
                            .ok_or_else(|| format!("'{field}' must be an id"))
                    })
                    .transpose()
            };
            match (id("announcementId")?, id("templateId")?) {
                (Some(_), Some(_)) => {
                    Err("name an announcementId or a templateId, not both".to_owned())
                }
                (Some(announcement), None) => Ok((
                    days,
                    EngagementScope::Announcement(AnnouncementId::from_uuid(announcement)),
                )),
                (None, Some(template)) => Ok((
                    days,
                    EngagementScope::Template(TemplateId::from_uuid(template)),
                )),
                (None, None) => Ok((days, EngagementScope::AnyMessage)),
            }
        }
        _ => Err(format!("an engagement condition {SHAPE}")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Uuid;

    fn now() -> Timestamp {
        Timestamp::parse("2026-06-30T12:00:00Z").expect("test time")
    }

    fn parse(operator: &str, value: Value) -> Result<Engagement, (&'static str, String)> {
        Engagement::parse(Activity::Opened, operator, Some(&value), now())
    }

    fn message(opened: Option<&str>) -> MessageActivity {
        MessageActivity {
            announcement: Some(AnnouncementId::from_uuid(Uuid::from_u128(1))),
            template: TemplateId::from_uuid(Uuid::from_u128(2)),
            sent_at: None,
            opened_at: opened.map(|at| Timestamp::parse(at).expect("test time")),
            clicked_at: None,
            bounced_at: None,
        }
    }

    #[test]
    fn the_window_starts_days_before_the_reference_time() {
        let condition = parse("within_days", json!(30)).expect("valid");
        assert_eq!(condition.since.to_string(), "2026-05-31T12:00:00.000Z");
        assert_eq!(condition.scope, EngagementScope::AnyMessage);
        // At the start is inside; a millisecond before is outside.
        assert!(condition.matches(&[message(Some("2026-05-31T12:00:00Z"))]));
        assert!(!condition.matches(&[message(Some("2026-05-31T11:59:59.999Z"))]));
        assert!(!condition.matches(&[message(None)]));
        assert!(!condition.matches(&[]));
    }

    #[test]
    fn not_within_days_is_the_complement() {
        let condition = parse("not_within_days", json!(30)).expect("valid");
        assert!(condition.matches(&[]));
        assert!(condition.matches(&[message(Some("2026-01-01T00:00:00Z"))]));
        assert!(!condition.matches(&[
            message(Some("2026-01-01T00:00:00Z")),
            message(Some("2026-06-29T00:00:00Z"))
        ]));
    }

    #[test]
    fn a_scope_keeps_to_its_announcement_or_template() {
        let mine = Uuid::from_u128(1).to_string();
        let other = Uuid::from_u128(9).to_string();
        let opened = [message(Some("2026-06-29T00:00:00Z"))];
        let of = |field: &str, id: &str| parse("within_days", json!({"days": 7, field: id}));
        assert!(of("announcementId", &mine).expect("valid").matches(&opened));
        assert!(!of("announcementId", &other)
            .expect("valid")
            .matches(&opened));
        assert!(of("templateId", &Uuid::from_u128(2).to_string())
            .expect("valid")
            .matches(&opened));
        assert!(!of("templateId", &mine).expect("valid").matches(&opened));
    }

    #[test]
    fn bad_windows_are_named() {
        for (operator, value, field) in [
            ("after", json!(3), "operator"),
            ("within_days", json!(0), "value"),
            ("within_days", json!(3651), "value"),
            ("within_days", json!(2.5), "value"),
            ("within_days", json!("30"), "value"),
            (
                "within_days",
                json!({"days": 3, "templateId": "x"}),
                "value",
            ),
            ("within_days", json!({"days": 3, "campaign": "x"}), "value"),
            (
                "within_days",
                json!({"days": 3, "templateId": Uuid::nil().to_string(),
                        "announcementId": Uuid::nil().to_string()}),
                "value",
            ),
        ] {
            let (got, _) = parse(operator, value.clone()).expect_err("refused");
            assert_eq!(got, field, "{operator} {value}");
        }
    }

    #[test]
    fn the_value_round_trips() {
        for value in [
            json!(90),
            json!({"days": 3, "announcementId": Uuid::from_u128(5).to_string()}),
            json!({"days": 3, "templateId": Uuid::from_u128(6).to_string()}),
        ] {
            let condition = parse("within_days", value.clone()).expect("valid");
            assert_eq!(condition.value(), value);
        }
    }
}
