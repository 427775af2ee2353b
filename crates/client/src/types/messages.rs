//! Messages: transactional sends and the outbox.

use mailroom_domain::{
    AccountId, AnnouncementId, AutomationId, ContactId, MessageId, TemplateId, Timestamp,
};
use serde::{Deserialize, Serialize};

use super::Attributes;

/// The body of `send_message`: one transactional message.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SendMessage {
    /// The template's slug.
    pub slug: String,
    /// The recipient; the contact is created if unknown.
    pub email: String,
    /// Values for the template.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Attributes>,
    /// Not before this time (at most 30 days ahead); `None` sends now.
    #[serde(rename = "sendAt", skip_serializing_if = "Option::is_none")]
    pub send_at: Option<Timestamp>,
}

impl SendMessage {
    /// The template `slug` to `email`, without data.
    pub fn new(slug: impl Into<String>, email: impl Into<String>) -> Self {
        Self {
            slug: slug.into(),
            email: email.into(),
            data: None,
            send_at: None,
        }
    }

    /// Sends it not before `at`.
    #[must_use]
    pub fn send_at(mut self, at: Timestamp) -> Self {
        self.send_at = Some(at);
        self
    }

    /// Adds one value for the template.
    pub fn data(mut self, name: impl Into<String>, value: impl Into<serde_json::Value>) -> Self {
        self.data
            .get_or_insert_with(Attributes::new)
            .insert(name.into(), value.into());
        self
    }
}

/// One message of the outbox. Optional fields are `None` while unset.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// The message's id.
    #[serde(rename = "_id")]
    pub id: MessageId,
    /// The account.
    pub account_id: AccountId,
    /// The recipient contact.
    pub contact_id: ContactId,
    /// The recipient's address.
    pub email: String,
    /// The template.
    pub template_id: TemplateId,
    /// `transactional`, `automation` or `announcement`.
    pub kind: String,
    /// `queued`, `sending`, `sent`, `failed`, `bounced` or `skipped`.
    pub status: String,
    /// The template's data.
    pub data: serde_json::Value,
    /// Delivery attempts made.
    pub attempts: u32,
    /// The `Message-ID` header it is sent with.
    pub message_id: String,
    /// When it was queued.
    pub create_date: Timestamp,
    /// When it last changed.
    pub update_date: Timestamp,
    /// The automation that queued it.
    #[serde(default)]
    pub automation_id: Option<AutomationId>,
    /// The announcement that queued it.
    #[serde(default)]
    pub announcement_id: Option<AnnouncementId>,
    /// A test send of its template.
    #[serde(default)]
    pub test: bool,
    /// When the recipient's server accepted it.
    #[serde(default)]
    pub sent_at: Option<Timestamp>,
    /// When it was first opened.
    #[serde(default)]
    pub opened_at: Option<Timestamp>,
    /// When a link was first clicked.
    #[serde(default)]
    pub clicked_at: Option<Timestamp>,
    /// When the next attempt is due.
    #[serde(default)]
    pub next_attempt_at: Option<Timestamp>,
    /// The last SMTP reply.
    #[serde(default)]
    pub last_reply: Option<String>,
    /// Why it was skipped.
    #[serde(default)]
    pub skip_reason: Option<String>,
}

/// Filters of `list_messages` and `count_messages`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageFilter {
    /// `queued`, `sending`, `sent`, `failed`, `bounced` or `skipped`.
    pub status: Option<String>,
    /// Only messages to this contact.
    pub contact_id: Option<ContactId>,
    /// Only messages of this announcement.
    pub announcement_id: Option<AnnouncementId>,
    /// Only messages of this template.
    pub template_id: Option<TemplateId>,
    /// Only messages queued to this address (any letters' case).
    pub email: Option<String>,
    /// List the newest first (the server's default is oldest first). Counting ignores it.
    pub newest_first: bool,
}

impl MessageFilter {
    /// The list's query: the filters and the order.
    pub(crate) fn list_query(&self) -> Vec<(&'static str, String)> {
        let mut query = self.query();
        if self.newest_first {
            query.push(("order", "newest".to_owned()));
        }
        query
    }

    /// The count's query: the filters.
    pub(crate) fn query(&self) -> Vec<(&'static str, String)> {
        let mut query = Vec::new();
        if let Some(status) = &self.status {
            query.push(("status", status.clone()));
        }
        if let Some(contact) = &self.contact_id {
            query.push(("contactId", contact.to_string()));
        }
        if let Some(announcement) = &self.announcement_id {
            query.push(("announcementId", announcement.to_string()));
        }
        if let Some(template) = &self.template_id {
            query.push(("templateId", template.to_string()));
        }
        if let Some(email) = &self.email {
            query.push(("email", email.clone()));
        }
        query
    }
}

/// One UTC day of message counters.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(missing_docs)] // Each counter is named for what it counts.
pub struct DailyStats {
    /// The start of the day.
    pub day: Timestamp,
    pub sent: u64,
    pub bounced: u64,
    pub complained: u64,
    pub opened: u64,
    pub clicked: u64,
    pub failed: u64,
    pub unsubscribed: u64,
    pub bounce_blocked: u64,
    pub complaint_blocked: u64,
    pub free_limit_capped: u64,
}
