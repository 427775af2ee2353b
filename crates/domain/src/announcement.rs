//! Announcements: one template sent once to a segment of the audience (docs/design.md#9-automations-and-announcements).
//!
//! An announcement is created `running`. A worker expands its audience in contact-id
//! order, a batch per transaction, recording the last contact reached
//! (`lastSampledContactId`), then it waits for its messages; when every message has a
//! final state it is `completed`. It is `failed` only when its audience can no longer be
//! evaluated (its stored conditions stopped parsing); the messages already queued are
//! still sent. There is no update path.

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
    /// Expanding its audience or waiting for its messages to be final.
    Running,
    /// Every message of the audience has a final state.
    Completed,
    /// The audience could not be evaluated any more (see `failure_reason`).
    Failed,
}

impl AnnouncementStatus {
    /// The wire and stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
        }
    }

    /// The status named `text`, if any.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::Running, Self::Completed, Self::Failed]
            .into_iter()
            .find(|status| status.as_str() == text)
    }
}

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
    /// Created; only contacts created until then belong to its audience.
    pub created_at: Timestamp,
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
        errors.into_result()?;
        match (name, template_id, audience) {
            (Some(name), Some(template_id), Some(audience)) => Ok(NewAnnouncement {
                name,
                template_id,
                audience,
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
        };
        let fields: Vec<String> = input
            .parse()
            .expect_err("invalid")
            .0
            .into_iter()
            .map(|error| error.field)
            .collect();
        assert_eq!(fields, ["templateId", "topicId"]);
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
        for status in [
            AnnouncementStatus::Running,
            AnnouncementStatus::Completed,
            AnnouncementStatus::Failed,
        ] {
            assert_eq!(AnnouncementStatus::parse(status.as_str()), Some(status));
        }
    }
}
