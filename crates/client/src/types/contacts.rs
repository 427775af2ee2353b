//! Contacts, their events and attributes, search, import and feedback.

use mailroom_domain::{AccountId, ContactEventId, ContactId, MessageId, Timestamp, TopicId};
use serde::{Deserialize, Serialize};

use super::Condition;

/// Custom attributes of a contact: slug → JSON value.
pub type Attributes = serde_json::Map<String, serde_json::Value>;

/// A contact. Flags (`hard_bounced`, …) are `Some` only while set.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Contact {
    /// The contact's id.
    #[serde(rename = "_id")]
    pub id: ContactId,
    /// The email address as first written.
    pub email: String,
    /// When it was created.
    pub create_date: Timestamp,
    /// The topics it unsubscribed from.
    pub topic_unsubscriptions: Vec<TopicId>,
    /// Its attributes (`{slug: value}`), in single reads, upserts and search results;
    /// `None` in plain lists.
    #[serde(default)]
    pub attributes: Option<Attributes>,
    /// When it hard-bounced.
    #[serde(default)]
    pub hard_bounced: Option<Timestamp>,
    /// When it complained.
    #[serde(default)]
    pub complaint_date: Option<Timestamp>,
    /// When it unsubscribed from everything.
    #[serde(default)]
    pub unsubscribe_date: Option<Timestamp>,
}

/// The body of `upsert_contact`: creates the contact or merges attributes into it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ContactUpsert {
    /// The email address.
    pub email: String,
    /// Attributes to merge.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attributes: Option<Attributes>,
}

/// The body of `unbounce_contact`: `hard_bounced: false` clears a hard bounce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unbounce {
    /// Must be `false`.
    pub hard_bounced: bool,
}

/// Filters and order of `list_contacts` and `count_contacts`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContactFilter {
    /// `createDate`, `email`, `messageCount`, `name` (default) or `status`.
    pub sort_by: Option<String>,
    /// `1` ascending (default) or `-1` descending.
    pub order: Option<String>,
    /// A case-insensitive email substring.
    pub search: Option<String>,
    /// An exact, case-insensitive email (takes precedence over `search`).
    pub email: Option<String>,
    /// `bounced` or `unsubscribed`.
    pub status: Option<String>,
}

impl NewEvent {
    /// An event `slug` for the contact `email`, without attributes.
    pub fn new(slug: impl Into<String>, email: impl Into<String>) -> Self {
        Self {
            slug: slug.into(),
            email: email.into(),
            attributes: None,
        }
    }

    /// Adds one attribute to merge into the contact.
    pub fn attribute(
        mut self,
        slug: impl Into<String>,
        value: impl Into<serde_json::Value>,
    ) -> Self {
        self.attributes
            .get_or_insert_with(Attributes::new)
            .insert(slug.into(), value.into());
        self
    }
}

impl ContactFilter {
    /// Only the contact with this email (the lookup a `sending` token may make).
    pub fn email(email: impl Into<String>) -> Self {
        Self {
            email: Some(email.into()),
            ..Self::default()
        }
    }

    pub(crate) fn query(&self) -> Vec<(&'static str, String)> {
        [
            ("sortBy", &self.sort_by),
            ("order", &self.order),
            ("search", &self.search),
            ("email", &self.email),
            ("status", &self.status),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.as_ref().map(|value| (name, value.clone())))
        .collect()
    }
}

/// The body of `search_contacts` and `count_search`: an audience.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContactSearch {
    /// Conditions combined with AND; empty for everyone.
    pub attributes: Vec<Condition>,
    /// Include contacts unsubscribed from everything.
    pub include_unsubscribed: bool,
    /// Leave out contacts unsubscribed from this topic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic_id: Option<TopicId>,
}

/// The answer of `import_contacts`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ImportReport {
    /// Contacts created.
    pub created: u64,
    /// Contacts updated.
    pub updated: u64,
    /// Lines refused.
    pub rejected: u64,
    /// Why lines were refused (the first ones).
    pub errors: Vec<ImportError>,
}

/// One refused line of an import.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ImportError {
    /// The line number in the CSV.
    pub line: u64,
    /// Why.
    pub reason: String,
}

/// The body of `record_event`: something a contact did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NewEvent {
    /// The event's name; normalised to snake_case (`signedUp` → `signed_up`).
    pub slug: String,
    /// The contact's email; the contact is created if unknown.
    pub email: String,
    /// Attributes to merge into the contact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attributes: Option<Attributes>,
}

/// A recorded contact event.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContactEvent {
    /// The event's id.
    #[serde(rename = "_id")]
    pub id: ContactEventId,
    /// The account.
    pub account_id: AccountId,
    /// The contact.
    pub contact_id: ContactId,
    /// The normalised slug.
    pub slug: String,
    /// When it was recorded.
    pub timestamp: Timestamp,
}

/// An event name seen in the account, with its count.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventName {
    /// The slug.
    pub slug: String,
    /// How many events carry it.
    pub count: u64,
    /// The latest.
    pub last_seen: Timestamp,
}

/// A contact attribute known to the account, with its type.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AttributeMeta {
    /// The slug.
    pub slug: String,
    /// `string`, `number`, `boolean` or `date`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `system`, `custom` or `event`.
    pub source: String,
}

/// The answer of `record_feedback`: what a bounce or complaint report was about.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Feedback {
    /// `bounce` or `complaint`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The contact it concerns.
    pub contact_id: ContactId,
    /// Whether it changed anything (a repeat is not recorded twice).
    pub recorded: bool,
    /// The message it reports on.
    #[serde(default)]
    pub message_id: Option<MessageId>,
    /// The reason the report gives.
    #[serde(default)]
    pub reason: Option<String>,
}
