//! Webhook events: one queued or attempted delivery of a contact lifecycle notification,
//! its payload, where it goes, and the retry rules that move it between statuses.
//!
//! ```text
//!            attempt fails, schedule left          attempt fails, schedule spent,
//!              ┌──────────────┐                    or a permanent failure (410, refused)
//!              ▼              │                 ┌──────────────────────────────┐
//! queued ──► (attempt) ──► retrying ──► (attempt) ──────────────────────────► failed
//!              │                            │
//!              └── any 2xx ──► delivered ◄──┘
//! ```
//!
//! A manual retry never revives an event: it creates a new `queued` event with the same
//! type and payload that points back at the old one (`parent_event_id`).

use std::time::Duration;

use serde::Serialize;

use crate::{
    webhook::{WebhookAuthType, WebhookConfig, WebhookEventType},
    AccountId, ContactId, FormId, Timestamp, TopicId, UserId, WebhookEventId,
};

/// Where a webhook event stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WebhookEventStatus {
    /// Waiting for its first attempt.
    Queued,
    /// At least one attempt failed; another is scheduled.
    Retrying,
    /// An attempt was answered with a 2xx status.
    Delivered,
    /// The retry schedule is spent, or the failure was permanent.
    Failed,
}

impl WebhookEventStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [Self; 4] = [Self::Queued, Self::Retrying, Self::Delivered, Self::Failed];

    /// The wire name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Retrying => "retrying",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
        }
    }

    /// Reads a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Whether the worker still has attempts to make.
    pub fn is_pending(&self) -> bool {
        matches!(self, Self::Queued | Self::Retrying)
    }
}

/// Where (and how) an event was or will be delivered, as shown on the record. Secrets
/// appear only as their last four characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookTarget {
    /// The endpoint.
    pub url: String,
    /// How the delivery authenticates.
    pub auth_type: WebhookAuthType,
    /// The last four characters of the signing secret.
    pub signing_secret_suffix: String,
    /// The username for `basic`.
    pub username: Option<String>,
    /// The last four characters of the password or token.
    pub password_or_token_suffix: Option<String>,
}

impl WebhookTarget {
    /// The target a configuration describes.
    pub fn of(config: &WebhookConfig) -> Self {
        Self {
            url: config.url.as_str().to_owned(),
            auth_type: config.auth_type,
            signing_secret_suffix: config.signing_secret.secret().suffix(),
            username: config.username.clone(),
            password_or_token_suffix: config.password_or_token.as_ref().map(|p| p.suffix()),
        }
    }
}

/// One webhook event.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookEvent {
    /// Id; also the `webhook-id` of every automatic attempt.
    pub id: WebhookEventId,
    /// The account it belongs to.
    pub account_id: AccountId,
    /// Its type.
    pub event_type: WebhookEventType,
    /// Delivery status.
    pub status: WebhookEventStatus,
    /// The `data` of the delivered body.
    pub payload: serde_json::Value,
    /// The target of the latest attempt (before any attempt: of the configuration when
    /// queued).
    pub target: WebhookTarget,
    /// When the change it reports happened (the body's `timestamp`).
    pub occurred_at: Timestamp,
    /// Attempts made.
    pub try_count: u32,
    /// When the next attempt is due; `None` once delivered or failed.
    pub next_attempt_at: Option<Timestamp>,
    /// When the latest attempt was made.
    pub last_attempt_at: Option<Timestamp>,
    /// The HTTP status of the latest attempt, when the endpoint answered.
    pub last_status_code: Option<u16>,
    /// Why the latest attempt failed.
    pub last_error: Option<String>,
    /// The event this one re-queues (manual retry).
    pub parent_event_id: Option<WebhookEventId>,
    /// Who asked for the manual retry.
    pub retried_by_user_id: Option<UserId>,
    /// When it was queued.
    pub created_at: Timestamp,
    /// When an attempt succeeded.
    pub delivered_at: Option<Timestamp>,
}

impl WebhookEvent {
    /// A new event, due at once.
    pub fn queued(
        id: WebhookEventId,
        account_id: AccountId,
        event_type: WebhookEventType,
        payload: serde_json::Value,
        target: WebhookTarget,
        occurred_at: Timestamp,
        now: Timestamp,
    ) -> Self {
        Self {
            id,
            account_id,
            event_type,
            status: WebhookEventStatus::Queued,
            payload,
            target,
            occurred_at,
            try_count: 0,
            next_attempt_at: Some(now),
            last_attempt_at: None,
            last_status_code: None,
            last_error: None,
            parent_event_id: None,
            retried_by_user_id: None,
            created_at: now,
            delivered_at: None,
        }
    }

    /// The manual retry of this event: a new queued event with the same type, payload and
    /// time of the change, pointing back at this one.
    pub fn retried(
        &self,
        id: WebhookEventId,
        by: UserId,
        target: WebhookTarget,
        now: Timestamp,
    ) -> Self {
        Self {
            parent_event_id: Some(self.id),
            retried_by_user_id: Some(by),
            ..Self::queued(
                id,
                self.account_id,
                self.event_type,
                self.payload.clone(),
                target,
                self.occurred_at,
                now,
            )
        }
    }

    /// The exact bytes of a delivery's body: `{"type","timestamp","data"}`.
    pub fn body(&self) -> Vec<u8> {
        #[derive(Serialize)]
        struct Envelope<'a> {
            #[serde(rename = "type")]
            event_type: &'a str,
            timestamp: String,
            data: &'a serde_json::Value,
        }
        let envelope = Envelope {
            event_type: self.event_type.as_str(),
            timestamp: self.occurred_at.to_string(),
            data: &self.payload,
        };
        serde_json::to_vec(&envelope).expect("a JSON value always serialises")
    }
}

/// The filters of the webhook event list and its count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WebhookEventFilter {
    /// Only events in this status.
    pub status: Option<WebhookEventStatus>,
    /// Only events of this type.
    pub event_type: Option<WebhookEventType>,
}

/// What happened to a contact, as a webhook reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContactChange {
    /// A hard bounce; carries the SMTP reply that caused it (e.g. `550 5.1.1 no such user`).
    Bounced {
        /// The receiving server's reply.
        smtp_reply: String,
    },
    /// A spam complaint.
    Complained,
    /// The contact was deleted.
    Deleted,
    /// An unsubscription from everything (`topic_id` is `None`) or from one topic.
    Unsubscribed {
        /// The topic, for a topic unsubscription.
        topic_id: Option<TopicId>,
    },
    /// A subscription through a subscribe form: confirmed (double opt-in), or a post
    /// without double opt-in that made the contact.
    Subscribed {
        /// The form.
        form_id: FormId,
    },
}

/// A change to a contact that a webhook may report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContactNotice {
    /// The account.
    pub account_id: AccountId,
    /// The contact.
    pub contact_id: ContactId,
    /// The contact's email.
    pub email: String,
    /// When it happened.
    pub occurred_at: Timestamp,
    /// What happened.
    pub change: ContactChange,
}

impl ContactNotice {
    /// The webhook type that reports it.
    pub fn event_type(&self) -> WebhookEventType {
        match self.change {
            ContactChange::Bounced { .. } => WebhookEventType::ContactBounced,
            ContactChange::Complained => WebhookEventType::ContactComplained,
            ContactChange::Deleted => WebhookEventType::ContactDeleted,
            ContactChange::Unsubscribed { .. } => WebhookEventType::ContactUnsubscribed,
            ContactChange::Subscribed { .. } => WebhookEventType::ContactSubscribed,
        }
    }

    /// The `data` of the delivery: `email`, `contactId`, `accountId`, `occurredAt`, plus
    /// `topicId` for a topic unsubscription, `smtpReply` for a bounce and `formId` for a
    /// subscription.
    pub fn payload(&self) -> serde_json::Value {
        let mut data = serde_json::Map::new();
        data.insert("email".into(), self.email.clone().into());
        data.insert("contactId".into(), self.contact_id.to_string().into());
        data.insert("accountId".into(), self.account_id.to_string().into());
        data.insert("occurredAt".into(), self.occurred_at.to_string().into());
        match &self.change {
            ContactChange::Bounced { smtp_reply } => {
                data.insert("smtpReply".into(), smtp_reply.clone().into());
            }
            ContactChange::Unsubscribed {
                topic_id: Some(topic),
            } => {
                data.insert("topicId".into(), topic.to_string().into());
            }
            ContactChange::Subscribed { form_id } => {
                data.insert("formId".into(), form_id.to_string().into());
            }
            ContactChange::Complained
            | ContactChange::Deleted
            | ContactChange::Unsubscribed { topic_id: None } => {}
        }
        serde_json::Value::Object(data)
    }
}

/// How an attempt ended, as the retry rules see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptVerdict {
    /// A 2xx answer.
    Delivered,
    /// A failure worth retrying, no earlier than `not_before` from now when the endpoint
    /// said so (`Retry-After` on 429 or 503).
    Retry {
        /// The endpoint's `Retry-After`, when honoured.
        not_before: Option<Duration>,
    },
    /// A failure that retrying cannot fix: 410 Gone, or a target the egress guard refuses.
    Permanent,
}

impl AttemptVerdict {
    /// Judges an HTTP answer: any 2xx is success; 410 ends the event; `Retry-After` counts
    /// on 429 and 503 only; everything else (3xx included: redirects are not followed)
    /// is retried.
    pub fn of_status(status: u16, retry_after: Option<Duration>) -> Self {
        match status {
            200..=299 => Self::Delivered,
            410 => Self::Permanent,
            429 | 503 => Self::Retry {
                not_before: retry_after,
            },
            _ => Self::Retry { not_before: None },
        }
    }
}

/// The longest `Retry-After` honoured. A receiver asking for more still gets its event
/// eventually instead of parking it indefinitely.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// Seconds between attempts (`MAILROOM_WEBHOOK_RETRY_SCHEDULE`): an event gets
/// `len + 1` attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySchedule(Vec<Duration>);

/// Where an attempt leaves an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settlement {
    /// The new status.
    pub status: WebhookEventStatus,
    /// When the next attempt is due (only while `retrying`).
    pub next_attempt_at: Option<Timestamp>,
}

impl RetrySchedule {
    /// A schedule of these intervals.
    pub fn new(intervals: Vec<Duration>) -> Self {
        Self(intervals)
    }

    /// A schedule from whole seconds.
    pub fn from_secs(seconds: &[u64]) -> Self {
        Self(seconds.iter().copied().map(Duration::from_secs).collect())
    }

    /// How many attempts an event gets in all.
    pub fn attempts(&self) -> usize {
        self.0.len() + 1
    }

    /// Settles an event after its `try_count`-th attempt (counting from 1) ended with
    /// `verdict` at `now`. A retry waits the schedule's interval, or the endpoint's
    /// `Retry-After` (capped at [`MAX_RETRY_AFTER`]) when that is longer.
    pub fn settle(&self, try_count: u32, verdict: AttemptVerdict, now: Timestamp) -> Settlement {
        let failed = Settlement {
            status: WebhookEventStatus::Failed,
            next_attempt_at: None,
        };
        match verdict {
            AttemptVerdict::Delivered => Settlement {
                status: WebhookEventStatus::Delivered,
                next_attempt_at: None,
            },
            AttemptVerdict::Permanent => failed,
            AttemptVerdict::Retry { not_before } => {
                let index = usize::try_from(try_count).unwrap_or(usize::MAX);
                let Some(interval) = index.checked_sub(1).and_then(|i| self.0.get(i)) else {
                    return failed;
                };
                let wait = not_before
                    .map(|asked| asked.min(MAX_RETRY_AFTER))
                    .map_or(*interval, |asked| asked.max(*interval));
                let wait = time::Duration::try_from(wait).unwrap_or(time::Duration::MAX);
                Settlement {
                    status: WebhookEventStatus::Retrying,
                    next_attempt_at: Some(now.plus(wait)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        secret::SecretString,
        webhook::{SigningSecret, WebhookUrl},
        Uuid,
    };

    fn now() -> Timestamp {
        Timestamp::parse("2026-11-22T12:00:00.000Z").expect("valid")
    }

    fn retry(seconds: Option<u64>) -> AttemptVerdict {
        AttemptVerdict::Retry {
            not_before: seconds.map(Duration::from_secs),
        }
    }

    #[test]
    fn statuses_round_trip() {
        for status in WebhookEventStatus::ALL {
            assert_eq!(WebhookEventStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(WebhookEventStatus::parse("sending"), None);
        assert!(WebhookEventStatus::Retrying.is_pending());
        assert!(!WebhookEventStatus::Failed.is_pending());
    }

    #[test]
    fn http_answers_are_judged() {
        assert_eq!(
            AttemptVerdict::of_status(200, None),
            AttemptVerdict::Delivered
        );
        assert_eq!(
            AttemptVerdict::of_status(204, None),
            AttemptVerdict::Delivered
        );
        assert_eq!(AttemptVerdict::of_status(302, None), retry(None));
        assert_eq!(
            AttemptVerdict::of_status(410, None),
            AttemptVerdict::Permanent
        );
        assert_eq!(
            AttemptVerdict::of_status(500, Some(Duration::from_secs(9))),
            retry(None)
        );
        assert_eq!(
            AttemptVerdict::of_status(429, Some(Duration::from_secs(9))),
            retry(Some(9))
        );
        assert_eq!(AttemptVerdict::of_status(503, None), retry(None));
    }

    #[test]
    fn the_schedule_gives_len_plus_one_attempts() {
        let schedule = RetrySchedule::from_secs(&[5, 300]);
        assert_eq!(schedule.attempts(), 3);
        let first = schedule.settle(1, retry(None), now());
        assert_eq!(first.status, WebhookEventStatus::Retrying);
        assert_eq!(
            first.next_attempt_at,
            Some(now().plus(time::Duration::seconds(5)))
        );
        let second = schedule.settle(2, retry(None), now());
        assert_eq!(
            second.next_attempt_at,
            Some(now().plus(time::Duration::seconds(300)))
        );
        let third = schedule.settle(3, retry(None), now());
        assert_eq!(third.status, WebhookEventStatus::Failed);
        assert_eq!(third.next_attempt_at, None);
        assert_eq!(
            schedule.settle(1, AttemptVerdict::Delivered, now()).status,
            WebhookEventStatus::Delivered
        );
        assert_eq!(
            schedule.settle(1, AttemptVerdict::Permanent, now()).status,
            WebhookEventStatus::Failed
        );
        let empty = RetrySchedule::from_secs(&[]);
        assert_eq!(
            empty.settle(1, retry(None), now()).status,
            WebhookEventStatus::Failed
        );
    }

    #[test]
    fn retry_after_is_honoured_when_longer_and_capped() {
        let schedule = RetrySchedule::from_secs(&[60]);
        let at = |asked| schedule.settle(1, retry(asked), now()).next_attempt_at;
        assert_eq!(at(Some(10)), Some(now().plus(time::Duration::seconds(60))));
        assert_eq!(
            at(Some(600)),
            Some(now().plus(time::Duration::seconds(600)))
        );
        assert_eq!(
            at(Some(10 * 24 * 3600)),
            Some(now().plus(time::Duration::hours(24)))
        );
    }

    fn config() -> WebhookConfig {
        WebhookConfig {
            url: WebhookUrl::parse("https://hooks.example.com/in").expect("url"),
            auth_type: WebhookAuthType::Basic,
            events: vec![WebhookEventType::ContactDeleted],
            username: Some("mailroom".into()),
            password_or_token: Some(SecretString::new("hunter2-pass")),
            signing_secret: SigningSecret::from_random([3u8; 32]),
        }
    }

    #[test]
    fn targets_show_only_suffixes_of_secrets() {
        let config = config();
        let target = WebhookTarget::of(&config);
        assert_eq!(target.url, "https://hooks.example.com/in");
        assert_eq!(target.password_or_token_suffix.as_deref(), Some("pass"));
        let secret = config.signing_secret.secret().expose();
        assert_eq!(target.signing_secret_suffix, secret[secret.len() - 4..]);
        assert_eq!(target.username.as_deref(), Some("mailroom"));
    }

    #[test]
    fn payloads_and_bodies() {
        let account = AccountId::from_uuid(Uuid::from_u128(1));
        let contact = ContactId::from_uuid(Uuid::from_u128(2));
        let topic = TopicId::from_uuid(Uuid::from_u128(3));
        let notice = |change| ContactNotice {
            account_id: account,
            contact_id: contact,
            email: "ada@example.com".into(),
            occurred_at: now(),
            change,
        };
        let deleted = notice(ContactChange::Deleted);
        assert_eq!(deleted.event_type(), WebhookEventType::ContactDeleted);
        assert_eq!(
            deleted.payload(),
            serde_json::json!({
                "email": "ada@example.com",
                "contactId": contact.to_string(),
                "accountId": account.to_string(),
                "occurredAt": "2026-11-22T12:00:00.000Z",
            })
        );
        let bounced = notice(ContactChange::Bounced {
            smtp_reply: "550 5.1.1 no such user".into(),
        });
        assert_eq!(bounced.event_type(), WebhookEventType::ContactBounced);
        assert_eq!(bounced.payload()["smtpReply"], "550 5.1.1 no such user");
        let from_topic = notice(ContactChange::Unsubscribed {
            topic_id: Some(topic),
        });
        assert_eq!(from_topic.payload()["topicId"], topic.to_string());
        let wholly = notice(ContactChange::Unsubscribed { topic_id: None });
        assert!(wholly.payload().get("topicId").is_none());

        let event = WebhookEvent::queued(
            WebhookEventId::from_uuid(Uuid::from_u128(9)),
            account,
            deleted.event_type(),
            deleted.payload(),
            WebhookTarget::of(&config()),
            now(),
            now(),
        );
        let body = String::from_utf8(event.body()).expect("utf-8");
        assert!(
            body.starts_with(
                r#"{"type":"contact.deleted","timestamp":"2026-11-22T12:00:00.000Z","data":{"#
            ),
            "{body}"
        );
        let retry = event.retried(
            WebhookEventId::from_uuid(Uuid::from_u128(10)),
            UserId::from_uuid(Uuid::from_u128(11)),
            WebhookTarget::of(&config()),
            now().plus(time::Duration::hours(1)),
        );
        assert_eq!(retry.parent_event_id, Some(event.id));
        assert_eq!(retry.status, WebhookEventStatus::Queued);
        assert_eq!(retry.try_count, 0);
        assert_eq!(retry.body(), event.body(), "same type, payload and time");
    }
}
