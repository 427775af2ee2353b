//! JSON shapes of contacts, events, attributes and audience search, and their conversion from domain values. Field
//! names follow the API specification (camelCase, `_id`).

use mailroom_domain::{patch::Field, Timestamp};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Resolved attributes as JSON: `{slug: value}` (dates as RFC 3339 with milliseconds).
fn attributes_json(
    attributes: mailroom_domain::attribute::ResolvedAttributes,
) -> serde_json::Map<String, serde_json::Value> {
    attributes
        .into_iter()
        .map(|(slug, value)| (slug, value.to_json()))
        .collect()
}

/// A contact. Flags are present only while set.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContactDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// Email.
    pub email: String,
    /// Creation time.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
    /// Present while the contact carries the hard-bounce flag.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub hard_bounced: Option<Timestamp>,
    /// When the contact complained.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub complaint_date: Option<Timestamp>,
    /// When the contact unsubscribed from everything.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub unsubscribe_date: Option<Timestamp>,
    /// Since when the contact waits for its double opt-in confirmation (it receives
    /// nothing but that mail); omitted otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub pending_since: Option<Timestamp>,
    /// When the contact last followed a form's confirmation link; omitted while never.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub confirmed_at: Option<Timestamp>,
    /// Topics the contact unsubscribed from.
    pub topic_unsubscriptions: Vec<String>,
    /// Resolved attributes (`{slug: value}`): in search results, upserts and single reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub attributes: Option<serde_json::Map<String, serde_json::Value>>,
}

impl ContactDto {
    /// A contact without attributes (the list).
    pub fn plain(contact: mailroom_domain::contact::Contact) -> Self {
        Self {
            id: contact.id.to_string(),
            email: contact.email,
            create_date: contact.created_at,
            hard_bounced: contact.hard_bounced_at,
            complaint_date: contact.complaint_at,
            unsubscribe_date: contact.unsubscribed_at,
            pending_since: contact.pending_since,
            confirmed_at: contact.confirmed_at,
            topic_unsubscriptions: contact
                .topic_unsubscriptions
                .iter()
                .map(ToString::to_string)
                .collect(),
            attributes: None,
        }
    }

    /// A contact with its resolved attributes.
    pub fn with_attributes(
        contact: mailroom_domain::contact::Contact,
        attributes: mailroom_domain::attribute::ResolvedAttributes,
    ) -> Self {
        Self {
            attributes: Some(attributes_json(attributes)),
            ..Self::plain(contact)
        }
    }
}

/// Body of `POST …/contacts` (create or merge).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UpsertContactBody {
    /// Email (matched case-insensitively).
    pub email: Option<String>,
    /// Custom attributes to merge: string, number, boolean or RFC 3339 date values.
    #[schema(value_type = Option<Object>)]
    pub attributes: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Body of `PATCH …/contacts/{contactId}`: exactly `{"hardBounced": false}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UnbounceBody {
    /// Must be `false`.
    #[serde(default)]
    #[schema(value_type = bool)]
    pub hard_bounced: Field<bool>,
}

/// Body of `POST …/events`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EventBody {
    /// The contact's email (created when unknown).
    pub email: Option<String>,
    /// Event name; normalised to snake_case.
    pub slug: Option<String>,
    /// Custom attributes to merge into the contact.
    #[schema(value_type = Option<Object>)]
    pub attributes: Option<serde_json::Map<String, serde_json::Value>>,
}

/// A recorded contact event.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContactEventDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// Account.
    pub account_id: String,
    /// Contact.
    pub contact_id: String,
    /// Normalised slug.
    pub slug: String,
    /// When it was recorded.
    #[schema(value_type = String, format = DateTime)]
    pub timestamp: Timestamp,
}

impl ContactEventDto {
    /// Shapes a recorded event of `account`.
    pub fn new(
        account: mailroom_domain::AccountId,
        event: mailroom_app::ports::ContactEvent,
    ) -> Self {
        Self {
            id: event.id.to_string(),
            account_id: account.to_string(),
            contact_id: event.contact_id.to_string(),
            slug: event.slug.as_str().to_owned(),
            timestamp: event.occurred_at,
        }
    }
}

/// An event name with its count and latest time.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventNameDto {
    /// Slug.
    pub slug: String,
    /// How many events.
    pub count: u64,
    /// The latest.
    #[schema(value_type = String, format = DateTime)]
    pub last_seen: Timestamp,
}

/// An attribute meta.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttributeMetaDto {
    /// Slug.
    pub slug: String,
    /// `string`, `number`, `boolean` or `date`.
    #[serde(rename = "type")]
    pub attribute_type: String,
    /// `system`, `custom` or `event`.
    pub source: String,
}

/// One attribute or engagement condition.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConditionBody {
    /// Attribute slug, or an engagement slug: `engagement.sent`, `engagement.opened`,
    /// `engagement.clicked`, `engagement.bounced`.
    pub slug: String,
    /// Operator (see the specification's table); `within_days` or `not_within_days` for
    /// an engagement slug.
    pub operator: String,
    /// Operand; its type is dictated by the operator. An engagement window is a number of
    /// days (1 to 3650), or `{"days": N, "announcementId" | "templateId": id}`.
    #[schema(value_type = Option<Object>)]
    pub value: Option<serde_json::Value>,
}

/// Body of `POST …/contacts/search` and its `/count`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SearchBody {
    /// Conditions combined with AND.
    pub attributes: Option<Vec<ConditionBody>>,
    /// Whether unsubscribed contacts are included (required).
    pub include_unsubscribed: Option<bool>,
    /// Exclude contacts unsubscribed from this topic.
    pub topic_id: Option<String>,
}

/// Query parameters of `DELETE …/contacts/{contactId}`.
#[derive(Debug, Deserialize)]
pub struct DeleteContactParams {
    /// `true` erases the person's data beyond the contact too.
    pub erase: Option<String>,
}

/// Query parameters of the contact list (besides `start` and `limit`).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
pub struct ContactListParams {
    /// `createDate`, `email`, `messageCount`, `name` (default) or `status`.
    pub sort_by: Option<String>,
    /// `1` ascending (default) or `-1` descending.
    pub order: Option<String>,
    /// Case-insensitive email substring.
    pub search: Option<String>,
    /// Exact case-insensitive email; takes precedence over `search`.
    pub email: Option<String>,
    /// `bounced` or `unsubscribed`.
    pub status: Option<String>,
}
