use std::collections::HashMap;

use mailroom_domain::{
    attribute::{
        AttributeMeta, AttributeSource, AttributeType, AttributeValue, ResolvedAttributes,
    },
    contact::{Contact, ContactQuery},
    email::EmailAddress,
    paging::PageRequest,
    slug::EventSlug,
    AccountId, ContactEventId, ContactId, Timestamp,
};

use crate::StoreError;

/// A recorded contact event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContactEvent {
    /// Id.
    pub id: ContactEventId,
    /// The contact who did it.
    pub contact_id: ContactId,
    /// Normalised slug.
    pub slug: EventSlug,
    /// When it happened (when it was recorded).
    pub occurred_at: Timestamp,
}

/// An event to record for the contact with an email, created when the account has none
/// ([`ContactRepository::record_event`]).
#[derive(Debug, Clone, Copy)]
pub struct EventOfEmail<'a> {
    /// The event's id.
    pub id: ContactEventId,
    /// The contact's email.
    pub email: &'a EmailAddress,
    /// The id the contact takes when it is created.
    pub new_contact: ContactId,
    /// Normalised slug.
    pub slug: &'a EventSlug,
    /// When it happened (when it was recorded).
    pub occurred_at: Timestamp,
}

/// What [`ContactRepository::record_event`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordedEvent {
    /// The contact the event was recorded for (found by email, or created).
    pub contact_id: ContactId,
    /// Whether the account has an enabled automation triggered by the event's slug.
    pub triggers: bool,
}

/// One event name of an account with how often and how recently it was recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventName {
    /// The slug.
    pub slug: String,
    /// How many events carry it.
    pub count: u64,
    /// The latest.
    pub last_seen: Timestamp,
}

/// Contacts, their attributes and their events.
pub trait ContactRepository {
    /// The types of the account's custom and event attributes, by slug.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn attribute_types(
        &mut self,
        account: AccountId,
    ) -> Result<HashMap<String, AttributeType>, StoreError>;

    /// Records slugs' types on first write (existing metas are kept) and returns the types
    /// now stored for them, so a concurrent first write of another type is detected. A
    /// new custom slug past [`MAX_CUSTOM_ATTRIBUTES`] custom slugs of the account is not
    /// recorded (counted under a lock that concurrent first writes wait for), and so is
    /// missing from the answer.
    ///
    /// [`MAX_CUSTOM_ATTRIBUTES`]: mailroom_domain::attribute::MAX_CUSTOM_ATTRIBUTES
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn ensure_attribute_metas(
        &mut self,
        account: AccountId,
        metas: &[(String, AttributeType, AttributeSource)],
        now: Timestamp,
    ) -> Result<HashMap<String, AttributeType>, StoreError>;

    /// Up to `limit` custom and event attribute metas by slug, skipping the first
    /// `offset` (paged in the store: an account may hold 100,000 slugs).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn list_attribute_metas(
        &mut self,
        account: AccountId,
        offset: u64,
        limit: u32,
    ) -> Result<Vec<AttributeMeta>, StoreError>;

    /// How many custom and event attribute metas the account has.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn count_attribute_metas(&mut self, account: AccountId) -> Result<u64, StoreError>;

    /// How many custom attribute metas the account has.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn count_custom_attribute_metas(&mut self, account: AccountId) -> Result<u64, StoreError>;

    /// The contact with this email (case-insensitively), created with `new_id` when there
    /// is none; `true` when it was created. One contact per email per account, also under
    /// concurrent calls.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn upsert_contact(
        &mut self,
        account: AccountId,
        new_id: ContactId,
        email: &EmailAddress,
        now: Timestamp,
    ) -> Result<(Contact, bool), StoreError>;

    /// As [`ContactRepository::upsert_contact`], answering only the contact's id: for
    /// callers on hot paths (recording an event) that do not need the contact loaded.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn upsert_contact_id(
        &mut self,
        account: AccountId,
        new_id: ContactId,
        email: &EmailAddress,
        now: Timestamp,
    ) -> Result<(ContactId, bool), StoreError>;

    /// Writes custom attribute values (replacing earlier values of the same slugs).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn set_attributes(
        &mut self,
        account: AccountId,
        contact: ContactId,
        values: &[(String, AttributeValue)],
    ) -> Result<(), StoreError>;

    /// Records an event for the contact with the event's email (created, with id
    /// `new_contact` and no attributes, when the account has none, as
    /// [`ContactRepository::upsert_contact_id`] would), creates the `event.<slug>`
    /// attribute's meta (type date, source event) when the account has none, and moves the
    /// contact's `event.<slug>` attribute to the event's time when later than the stored
    /// one. Answers the contact and whether the account has an enabled automation
    /// triggered by the slug, so the caller reads the automations only when one listens:
    /// an event is one statement in the usual case (docs/performance.md, "Design choices, measured").
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn record_event(
        &mut self,
        account: AccountId,
        event: &EventOfEmail<'_>,
    ) -> Result<RecordedEvent, StoreError>;

    /// As [`ContactRepository::record_event`], but writes nothing, and answers `None`,
    /// when the account has an enabled automation triggered by the slug. The write is one
    /// statement, so a caller outside a transaction ([`crate::ports::in_single_statement`])
    /// records an event that nothing listens to in one round trip; an event an automation
    /// listens to must be recorded in a transaction with the messages it queues.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn record_event_unless_listened(
        &mut self,
        account: AccountId,
        event: &EventOfEmail<'_>,
    ) -> Result<Option<ContactId>, StoreError>;

    /// The contact, if it is the account's.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_contact(
        &mut self,
        account: AccountId,
        id: ContactId,
    ) -> Result<Option<Contact>, StoreError>;

    /// The account's contact of `email` (compared case-insensitively), if there is one.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_contact_by_email(
        &mut self,
        account: AccountId,
        email: &EmailAddress,
    ) -> Result<Option<Contact>, StoreError>;

    /// These contacts, in the order of `ids` (unknown ids are skipped).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_contacts(
        &mut self,
        account: AccountId,
        ids: &[ContactId],
    ) -> Result<Vec<Contact>, StoreError>;

    /// One page of the contact list.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn list_contacts(
        &mut self,
        account: AccountId,
        query: &ContactQuery,
        page: PageRequest,
    ) -> Result<Vec<Contact>, StoreError>;

    /// How many contacts the list would show over all pages.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn count_contacts(
        &mut self,
        account: AccountId,
        query: &ContactQuery,
    ) -> Result<u64, StoreError>;

    /// The stored attributes (custom and event) of these contacts; a contact without any
    /// has no entry. The system attributes are the contact's own fields
    /// ([`Contact::system_attributes`](mailroom_domain::contact::Contact::system_attributes));
    /// `crate::contacts::resolve_attributes` joins the two.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn stored_attributes(
        &mut self,
        account: AccountId,
        ids: &[ContactId],
    ) -> Result<HashMap<ContactId, ResolvedAttributes>, StoreError>;

    /// Clears the hard-bounce flag; `false` when there is no such contact.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn clear_hard_bounce(&mut self, account: AccountId, id: ContactId) -> Result<bool, StoreError>;

    /// Deletes the contact with its events, attributes and unsubscriptions; `false` when
    /// there is none.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn delete_contact(&mut self, account: AccountId, id: ContactId) -> Result<bool, StoreError>;

    /// Removes the personal data an erased person leaves outside the contact: on every
    /// message to `normalized_email` (the contact's, and those of earlier contacts of the
    /// address) the address, the send's data, the last reply and the idempotency key are
    /// blanked and its tracked links dropped; webhook events about `contact` or the
    /// address lose their `email` and `smtpReply`. Returns how many messages it blanked.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn erase_personal_traces(
        &mut self,
        account: AccountId,
        contact: ContactId,
        normalized_email: &str,
    ) -> Result<u64, StoreError>;

    /// The account's event names with counts and latest times, by slug.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn event_names(&mut self, account: AccountId) -> Result<Vec<EventName>, StoreError>;

    /// Folds up to `limit` recorded event-name increments (of any account) into the
    /// per-name totals, and returns how many it folded. Concurrent folds take disjoint
    /// increments.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn fold_event_name_increments(&mut self, limit: u32) -> Result<u64, StoreError>;

    /// One page of a contact's events, newest first (ties by id, newest first).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn list_contact_events(
        &mut self,
        account: AccountId,
        contact: ContactId,
        page: PageRequest,
    ) -> Result<Vec<ContactEvent>, StoreError>;
}
