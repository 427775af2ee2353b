//! Announcements: one template sent once to a segment of the audience (docs/design.md#9-automations-and-announcements).
//!
//! An announcement is created `running`, or `scheduled` when it names a `sendAt` in the
//! future (it becomes `running` when a worker finds it due). A worker expands its audience
//! in contact-id order, a batch per transaction, recording the last contact reached
//! (`lastSampledContactId`), then it waits for its messages; when every message has a
//! final state it is `completed`. It is `failed` only when its audience can no longer be
//! evaluated (its stored conditions stopped parsing); the messages already queued are
//! still sent. There is no update path, only the controls of [`AnnouncementControl`]:
//! pause (`running` → `paused`: nothing more is expanded or claimed), resume (`paused` →
//! `running`) and cancel (`scheduled`, `running` or `paused` → `cancelled`: every message
//! not yet handed to a worker is `skipped` with reason `cancelled`).

use serde_json::{Map, Value};

use crate::{
    condition::{AudienceDefinition, ConditionInput},
    AnnouncementId, ContactId, SegmentId, TemplateId, Timestamp, TopicId, ValidationErrors,
};

/// The longest name accepted, in characters.
pub const MAX_NAME_CHARS: usize = 200;

/// Where an announcement is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnnouncementStatus {
    /// Waiting for its `sendAt`; nothing is expanded until then.
    Scheduled,
    /// Expanding its audience or waiting for its messages to be final.
    Running,
    /// Paused by hand: nothing more is expanded, and its waiting messages are held.
    Paused,
    /// Every message of the audience has a final state.
    Completed,
    /// Cancelled by hand: what was not sent by then is skipped.
    Cancelled,
    /// The audience could not be evaluated any more (see `failure_reason`).
    Failed,
}

impl AnnouncementStatus {
    /// The wire and stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduled => "scheduled",
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Completed => "completed",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
        }
    }

    /// Every status.
    pub const ALL: [Self; 6] = [
        Self::Scheduled,
        Self::Running,
        Self::Paused,
        Self::Completed,
        Self::Cancelled,
        Self::Failed,
    ];

    /// The status named `text`, if any.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == text)
    }

    /// Whether nothing can change it any more.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Completed | Self::Cancelled | Self::Failed)
    }
}

/// What an operator may do to an announcement after creating it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnnouncementControl {
    /// Stop expanding and claiming until resumed.
    Pause,
    /// Go on after a pause.
    Resume,
    /// Stop for good; what is not sent by then is skipped.
    Cancel,
}

impl AnnouncementControl {
    /// The path segment and the verb the API names it with.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pause => "pause",
            Self::Resume => "resume",
            Self::Cancel => "cancel",
        }
    }

    /// The status an announcement in `from` takes, or why it cannot.
    ///
    /// # Errors
    /// A sentence for the 409 when `from` does not allow this control.
    pub fn apply(self, from: AnnouncementStatus) -> Result<AnnouncementStatus, String> {
        use AnnouncementStatus as S;
        match (self, from) {
            (Self::Pause, S::Running) => Ok(S::Paused),
            (Self::Resume, S::Paused) => Ok(S::Running),
            (Self::Cancel, S::Scheduled | S::Running | S::Paused) => Ok(S::Cancelled),
            (Self::Pause, S::Scheduled) => Err(
                "a scheduled announcement cannot be paused: cancel it, or let it start and pause it then"
                    .into(),
            ),
            (control, from) => Err(format!(
                "a {} announcement cannot be {}",
                from.as_str(),
                match control {
                    Self::Pause => "paused",
                    Self::Resume => "resumed",
                    Self::Cancel => "cancelled",
                }
            )),
        }
    }
}

/// How far ahead `sendAt` may lie.
pub const MAX_SCHEDULE_AHEAD: time::Duration = time::Duration::days(366);

/// A stored announcement.
#[derive(Debug, Clone, PartialEq)]
pub struct Announcement {
    /// Id.
    pub id: AnnouncementId,
    /// Internal name, never seen by recipients.
    pub name: String,
    /// The template it sends.
    pub template_id: TemplateId,
    /// The template's subject when the announcement was created.
    pub subject: String,
    /// Contacts unsubscribed from this topic are left out.
    pub topic_id: Option<TopicId>,
    /// Whether contacts unsubscribed from everything are included.
    pub include_unsubscribed: bool,
    /// The attribute conditions, as received (validated at creation).
    pub attributes: Vec<ConditionInput>,
    /// The saved segment whose definition was copied into the three fields above at
    /// creation, if it was made from one (the segment may have changed or gone since).
    pub segment_id: Option<SegmentId>,
    /// Where it is.
    pub status: AnnouncementStatus,
    /// When it was scheduled to start, if it was (it stays after the start).
    pub send_at: Option<Timestamp>,
    /// The greatest contact id the expansion has reached.
    pub last_sampled_contact_id: Option<ContactId>,
    /// How many messages the expansion has queued so far.
    pub audience_size: u64,
    /// When the expansion reached the end of the audience.
    pub expanded_at: Option<Timestamp>,
    /// When it became final.
    pub process_date: Option<Timestamp>,
    /// Why it failed (only while `failed`).
    pub failure_reason: Option<String>,
    /// Created; only contacts created until then (or until `send_at`, when later) belong
    /// to its audience ([`Announcement::audience_until`]).
    pub created_at: Timestamp,
}

impl Announcement {
    /// The end of its audience: contacts created until then belong to it. That is its
    /// creation, or its scheduled start for one created with `sendAt`.
    pub fn audience_until(&self) -> Timestamp {
        match self.send_at {
            Some(start) if start.as_datetime() > self.created_at.as_datetime() => start,
            _ => self.created_at,
        }
    }
}

/// How many of an announcement's messages are in each state, and how many were opened
/// and clicked (first open and first click per message), as the store keeps them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AnnouncementCounters {
    /// Waiting to be sent (including retries).
    pub queued: u64,
    /// Claimed by a worker, being sent now.
    pub sending: u64,
    /// Accepted by the recipient's server.
    pub sent: u64,
    /// Given up on (permanent refusal, attempts spent, or not renderable).
    pub failed: u64,
    /// Hard-bounced, at send time or reported later.
    pub bounced: u64,
    /// Not sent by rule (suppression, unsubscription, send limit, no mail server).
    pub skipped: u64,
    /// Opened at least once.
    pub opened: u64,
    /// Clicked at least once.
    pub clicked: u64,
}

/// The body of `POST …/announcements` as received.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AnnouncementInput {
    /// `name`, required.
    pub name: Option<String>,
    /// `templateId`, required.
    pub template_id: Option<String>,
    /// `topicId`, optional.
    pub topic_id: Option<String>,
    /// `includeUnsubscribed`, required unless `segmentId` is given.
    pub include_unsubscribed: Option<bool>,
    /// `attributes`, optional; combined with AND.
    pub attributes: Option<Vec<ConditionInput>>,
    /// `segmentId`: a saved segment whose definition stands for the three fields above,
    /// which may then not be given.
    pub segment_id: Option<String>,
    /// `sendAt`, optional: an RFC 3339 time to start at instead of now.
    pub send_at: Option<String>,
}

/// Who an announcement reaches, as its body says.
#[derive(Debug, Clone, PartialEq)]
pub enum AnnouncementAudience {
    /// The body's own `attributes`, `includeUnsubscribed` and `topicId`.
    Given(AudienceDefinition),
    /// A saved segment of the account, whose definition is copied at creation.
    Segment(SegmentId),
}

/// A body whose fields have the right shape; the use case checks that the template,
/// topic and segment exist and parses the conditions against the account's attributes.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAnnouncement {
    /// Name.
    pub name: String,
    /// Template.
    pub template_id: TemplateId,
    /// Who it reaches.
    pub audience: AnnouncementAudience,
    /// When to start; `None` starts at once.
    pub send_at: Option<Timestamp>,
}

impl NewAnnouncement {
    /// The status the announcement is created in at `now`: `scheduled` for a `sendAt` in
    /// the future, else `running` (a `sendAt` of now or just past starts it at once).
    ///
    /// # Errors
    /// `sendAt` more than a minute in the past, or more than [`MAX_SCHEDULE_AHEAD`] ahead.
    pub fn starting_status(&self, now: Timestamp) -> Result<AnnouncementStatus, ValidationErrors> {
        let Some(at) = self.send_at else {
            return Ok(AnnouncementStatus::Running);
        };
        let ahead = at.as_datetime() - now.as_datetime();
        if ahead < -time::Duration::minutes(1) {
            return Err(ValidationErrors::single(
                "sendAt",
                "must not lie in the past",
            ));
        }
        if ahead > MAX_SCHEDULE_AHEAD {
            return Err(ValidationErrors::single(
                "sendAt",
                "must lie at most 366 days ahead",
            ));
        }
        Ok(if ahead > time::Duration::ZERO {
            AnnouncementStatus::Scheduled
        } else {
            AnnouncementStatus::Running
        })
    }
}

impl AnnouncementInput {
    /// Checks the fields' presence and shape.
    ///
    /// # Errors
    /// Every problem, each under its field.
    pub fn parse(self) -> Result<NewAnnouncement, ValidationErrors> {
        let mut errors = ValidationErrors::new();
        let name = errors.required_name("name", self.name.as_deref(), MAX_NAME_CHARS);
        let template_id = errors.required_id("templateId", self.template_id.as_deref(), "template");
        let audience = match self.segment_id.as_deref() {
            Some(segment) => Self::segment_audience(
                segment,
                [
                    ("attributes", self.attributes.is_some()),
                    ("includeUnsubscribed", self.include_unsubscribed.is_some()),
                    ("topicId", self.topic_id.is_some()),
                ],
                &mut errors,
            ),
            None => Self::given_audience(
                self.topic_id.as_deref(),
                self.include_unsubscribed,
                self.attributes.unwrap_or_default(),
                &mut errors,
            ),
        };
        let send_at = self.send_at.as_deref().and_then(|text| {
            let parsed = Timestamp::parse(text).ok();
            if parsed.is_none() {
                errors.push("sendAt", "must be an RFC 3339 timestamp");
            }
            parsed
        });
        errors.into_result()?;
        match (name, template_id, audience) {
            (Some(name), Some(template_id), Some(audience)) => Ok(NewAnnouncement {
                name,
                template_id,
                audience,
                send_at,
            }),
            _ => Err(ValidationErrors::single("body", "is incomplete")),
        }
    }

    /// `segmentId`, which stands for the audience fields: any of them beside it is
    /// refused, named.
    fn segment_audience(
        segment: &str,
        given: [(&str, bool); 3],
        errors: &mut ValidationErrors,
    ) -> Option<AnnouncementAudience> {
        for (field, _) in given.iter().filter(|(_, present)| *present) {
            errors.push(
                *field,
                "must not be given with segmentId: the segment's definition is the audience",
            );
        }
        let parsed = SegmentId::parse(segment).ok();
        if parsed.is_none() {
            errors.push("segmentId", "must be the id of a segment of this account");
        }
        parsed.map(AnnouncementAudience::Segment)
    }

    fn given_audience(
        topic_id: Option<&str>,
        include_unsubscribed: Option<bool>,
        attributes: Vec<ConditionInput>,
        errors: &mut ValidationErrors,
    ) -> Option<AnnouncementAudience> {
        let topic = topic_id.and_then(|text| {
            let parsed = TopicId::parse(text).ok();
            if parsed.is_none() {
                errors.push("topicId", "must be the id of a topic of this account");
            }
            parsed
        });
        if include_unsubscribed.is_none() {
            errors.push("includeUnsubscribed", "is required");
        }
        if let Err(too_many) = crate::condition::check_condition_count(&attributes) {
            errors.0.extend(too_many.0);
        }
        include_unsubscribed.map(|include_unsubscribed| {
            AnnouncementAudience::Given(AudienceDefinition {
                attributes,
                include_unsubscribed,
                topic,
            })
        })
    }
}

impl ConditionInput {
    /// The condition as the API shows it: `{slug, operator, value?}`.
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("slug".into(), Value::String(self.slug.clone()));
        object.insert("operator".into(), Value::String(self.operator.clone()));
        if let Some(value) = &self.value {
            object.insert("value".into(), value.clone());
        }
        Value::Object(object)
    }

    /// Reads back what [`ConditionInput::to_json`] wrote; `None` for any other shape.
    pub fn from_json(value: &Value) -> Option<Self> {
        let object = value.as_object()?;
        Some(Self {
            slug: object.get("slug")?.as_str()?.to_owned(),
            operator: object.get("operator")?.as_str()?.to_owned(),
            value: object.get("value").cloned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn required_fields_are_named() {
        let fields: Vec<String> = AnnouncementInput::default()
            .parse()
            .expect_err("invalid")
            .0
            .into_iter()
            .map(|error| error.field)
            .collect();
        assert_eq!(fields, ["name", "templateId", "includeUnsubscribed"]);
    }

    #[test]
    fn ids_must_be_ids() {
        let input = AnnouncementInput {
            name: Some("Launch".into()),
            template_id: Some("x".into()),
            topic_id: Some("y".into()),
            include_unsubscribed: Some(false),
            attributes: None,
            segment_id: None,
            send_at: Some("tomorrow".into()),
        };
        let fields: Vec<String> = input
            .parse()
            .expect_err("invalid")
            .0
            .into_iter()
            .map(|error| error.field)
            .collect();
        assert_eq!(fields, ["templateId", "topicId", "sendAt"]);
    }

    #[test]
    fn a_segment_stands_for_the_audience_fields_which_may_not_come_beside_it() {
        let segment = "01936c5e-7b2a-7cde-8f00-0123456789ab";
        let input = AnnouncementInput {
            name: Some("Launch".into()),
            template_id: Some(segment.into()),
            segment_id: Some(segment.into()),
            ..AnnouncementInput::default()
        };
        let parsed = input.clone().parse().expect("a segment alone");
        assert_eq!(
            parsed.audience,
            AnnouncementAudience::Segment(SegmentId::parse(segment).expect("id"))
        );
        let beside = AnnouncementInput {
            attributes: Some(vec![]),
            include_unsubscribed: Some(true),
            topic_id: Some(segment.into()),
            ..input.clone()
        };
        let fields: Vec<String> = beside
            .parse()
            .expect_err("fields beside the segment")
            .0
            .into_iter()
            .map(|error| error.field)
            .collect();
        assert_eq!(fields, ["attributes", "includeUnsubscribed", "topicId"]);
        let malformed = AnnouncementInput {
            segment_id: Some("nope".into()),
            ..input
        };
        assert_eq!(
            malformed.parse().expect_err("no id").0[0].field,
            "segmentId"
        );
    }

    #[test]
    fn conditions_round_trip_through_json() {
        for value in [Some(json!("x")), Some(json!(3)), None] {
            let condition = ConditionInput {
                slug: "plan".into(),
                operator: "s_equal".into(),
                value,
            };
            assert_eq!(
                ConditionInput::from_json(&condition.to_json()),
                Some(condition)
            );
        }
        assert_eq!(ConditionInput::from_json(&json!([1])), None);
    }

    #[test]
    fn statuses_round_trip() {
        for status in AnnouncementStatus::ALL {
            assert_eq!(AnnouncementStatus::parse(status.as_str()), Some(status));
        }
    }

    #[test]
    fn controls_move_only_the_statuses_they_name() {
        use AnnouncementControl::{Cancel, Pause, Resume};
        use AnnouncementStatus as S;
        let allowed = [
            (Pause, S::Running, S::Paused),
            (Resume, S::Paused, S::Running),
            (Cancel, S::Scheduled, S::Cancelled),
            (Cancel, S::Running, S::Cancelled),
            (Cancel, S::Paused, S::Cancelled),
        ];
        for control in [Pause, Resume, Cancel] {
            for from in S::ALL {
                let expected = allowed
                    .iter()
                    .find(|(c, f, _)| *c == control && *f == from)
                    .map(|(_, _, to)| *to);
                assert_eq!(
                    control.apply(from).ok(),
                    expected,
                    "{} from {}",
                    control.as_str(),
                    from.as_str()
                );
            }
        }
        assert!(Resume
            .apply(S::Completed)
            .unwrap_err()
            .contains("completed announcement cannot be resumed"));
    }

    #[test]
    fn send_at_schedules_in_the_future_starts_now_and_refuses_the_past_and_the_far_future() {
        let now = Timestamp::parse("2026-06-01T12:00:00Z").expect("now");
        let at = |text: &str| NewAnnouncement {
            name: "Launch".into(),
            template_id: TemplateId::parse("01936c5e-7b2a-7cde-8f00-0123456789ab").expect("id"),
            audience: AnnouncementAudience::Segment(
                SegmentId::parse("01936c5e-7b2a-7cde-8f00-0123456789ab").expect("id"),
            ),
            send_at: Some(Timestamp::parse(text).expect("time")),
        };
        assert_eq!(
            at("2026-06-02T08:00:00Z").starting_status(now),
            Ok(AnnouncementStatus::Scheduled)
        );
        assert_eq!(
            at("2026-06-01T11:59:30Z").starting_status(now),
            Ok(AnnouncementStatus::Running)
        );
        for refused in ["2026-06-01T11:00:00Z", "2027-06-03T12:00:00Z"] {
            assert_eq!(
                at(refused).starting_status(now).expect_err(refused).0[0].field,
                "sendAt"
            );
        }
    }
}
