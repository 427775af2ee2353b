//! Contacts: the members of an account's audience, their status, and how lists of them
//! are filtered and sorted.

use crate::{
    attribute::{ResolvedAttributes, SYSTEM_ATTRIBUTES},
    condition::system_value,
    ContactId, Timestamp, TopicId,
};

/// A contact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contact {
    /// Id.
    pub id: ContactId,
    /// Email as first written.
    pub email: String,
    /// Creation time.
    pub created_at: Timestamp,
    /// Set while the contact carries the hard-bounce flag.
    pub hard_bounced_at: Option<Timestamp>,
    /// When the contact complained.
    pub complaint_at: Option<Timestamp>,
    /// When the contact unsubscribed from everything.
    pub unsubscribed_at: Option<Timestamp>,
    /// Topics the contact unsubscribed from.
    pub topic_unsubscriptions: Vec<TopicId>,
    /// Messages sent to the contact.
    pub message_count: u32,
    /// Since when a double opt-in form's contact waits for its confirmation: it receives
    /// nothing but the confirmation mail until then.
    pub pending_since: Option<Timestamp>,
    /// When the contact last followed a form's confirmation link.
    pub confirmed_at: Option<Timestamp>,
}

impl Contact {
    /// The contact's system attributes (`email`, `create_date`, `message_count`), read
    /// from the contact itself, as segment conditions read them; the stored (custom and
    /// event) attributes come from the store.
    pub fn system_attributes(&self) -> ResolvedAttributes {
        SYSTEM_ATTRIBUTES
            .iter()
            .filter_map(|(slug, _)| {
                system_value(self, slug).map(|value| ((*slug).to_owned(), value))
            })
            .collect()
    }
}

/// A contact's overall status; the order is the sort order of `sortBy=status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ContactStatus {
    /// Receives mail.
    Active,
    /// Unsubscribed from everything.
    Unsubscribed,
    /// Complained.
    Complained,
    /// Hard-bounced.
    Bounced,
}

impl Contact {
    /// The strongest status the contact carries (bounced > complained > unsubscribed).
    pub fn status(&self) -> ContactStatus {
        if self.hard_bounced_at.is_some() {
            ContactStatus::Bounced
        } else if self.complaint_at.is_some() {
            ContactStatus::Complained
        } else if self.unsubscribed_at.is_some() {
            ContactStatus::Unsubscribed
        } else {
            ContactStatus::Active
        }
    }
}

/// The sort keys of the contact list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContactSort {
    /// Creation time.
    CreateDate,
    /// Email, case-insensitively.
    Email,
    /// Messages sent.
    MessageCount,
    /// The `name` custom attribute, case-insensitively, contacts without one last.
    Name,
    /// Active < unsubscribed < complained < bounced.
    Status,
}

impl ContactSort {
    /// Reads `sortBy`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "createDate" => Some(Self::CreateDate),
            "email" => Some(Self::Email),
            "messageCount" => Some(Self::MessageCount),
            "name" => Some(Self::Name),
            "status" => Some(Self::Status),
            _ => None,
        }
    }
}

/// The `status` filter of the contact list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    /// Carries the hard-bounce flag.
    Bounced,
    /// Unsubscribed from everything.
    Unsubscribed,
}

impl StatusFilter {
    /// Reads `status`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "bounced" => Some(Self::Bounced),
            "unsubscribed" => Some(Self::Unsubscribed),
            _ => None,
        }
    }
}

/// Which contacts a list shows and in what order. Ties are broken by id, so paging is
/// stable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContactQuery {
    /// Sort key.
    pub sort: ContactSort,
    /// Ascending when true.
    pub ascending: bool,
    /// Case-insensitive email substring.
    pub search: Option<String>,
    /// Exact case-insensitive email; takes precedence over `search`.
    pub email: Option<String>,
    /// Status filter.
    pub status: Option<StatusFilter>,
}

impl Default for ContactQuery {
    fn default() -> Self {
        Self {
            sort: ContactSort::Name,
            ascending: true,
            search: None,
            email: None,
            status: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribute::AttributeValue;

    #[test]
    fn system_attributes_are_the_contacts_own_fields() {
        let created_at = Timestamp::parse("2026-11-29T10:00:00Z").expect("timestamp");
        let contact = Contact {
            id: ContactId::from_uuid(crate::Uuid::from_u128(7)),
            email: "Ada@Example.org".into(),
            created_at,
            hard_bounced_at: None,
            complaint_at: None,
            unsubscribed_at: None,
            topic_unsubscriptions: Vec::new(),
            message_count: 3,
            pending_since: None,
            confirmed_at: None,
        };
        let attributes = contact.system_attributes();
        assert_eq!(
            attributes.keys().map(String::as_str).collect::<Vec<_>>(),
            ["create_date", "email", "message_count"]
        );
        assert_eq!(
            attributes["email"],
            AttributeValue::String("Ada@Example.org".into())
        );
        assert_eq!(attributes["create_date"], AttributeValue::Date(created_at));
        assert_eq!(attributes["message_count"], AttributeValue::Number(3.0));
    }
}
