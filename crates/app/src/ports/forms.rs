use mailroom_domain::{
    form::Form, paging::PageRequest, AccountId, ContactId, FormConfirmationId, FormId, TemplateId,
    Timestamp, TopicId,
};
use serde_json::{Map, Value};

use crate::StoreError;

/// One confirmation mail of a double opt-in form: what its signed link names.
#[derive(Debug, Clone, PartialEq)]
pub struct FormConfirmation {
    /// Id (in the link).
    pub id: FormConfirmationId,
    /// The form posted to.
    pub form_id: FormId,
    /// The contact it confirms.
    pub contact_id: ContactId,
    /// The accepted attributes the post carried, written when the link is followed.
    pub attributes: Map<String, Value>,
    /// When the post asked for it.
    pub created_at: Timestamp,
    /// When the link was followed; a link is used once.
    pub confirmed_at: Option<Timestamp>,
}

/// Subscribe forms, their confirmations, and the contact state they change.
pub trait FormRepository {
    /// One page of the account's forms, oldest first.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn list_forms(
        &mut self,
        account: AccountId,
        page: PageRequest,
    ) -> Result<Vec<Form>, StoreError>;

    /// How many forms the account holds.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn count_forms(&mut self, account: AccountId) -> Result<u64, StoreError>;

    /// How many forms the account holds, read after taking a lock (to the end of the
    /// transaction) that every other call for the account waits for, so two concurrent
    /// creations cannot both pass the bound.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn lock_and_count_forms(&mut self, account: AccountId) -> Result<u64, StoreError>;

    /// The form, if it is the account's.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_form(&mut self, account: AccountId, id: FormId) -> Result<Option<Form>, StoreError>;

    /// The names of the account's forms whose confirmation mail is `template`.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn forms_confirming_with(
        &mut self,
        account: AccountId,
        template: TemplateId,
    ) -> Result<Vec<String>, StoreError>;

    /// Stores a new form.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn insert_form(&mut self, account: AccountId, form: &Form) -> Result<(), StoreError>;

    /// Writes the form's settings and update time back.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn update_form(&mut self, account: AccountId, form: &Form) -> Result<(), StoreError>;

    /// Deletes the form and its confirmations (their links stop working); `false` when
    /// there was none.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn delete_form(&mut self, account: AccountId, id: FormId) -> Result<bool, StoreError>;

    /// Marks the contact pending since `now`, unless it is already.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn mark_contact_pending(
        &mut self,
        account: AccountId,
        contact: ContactId,
        now: Timestamp,
    ) -> Result<(), StoreError>;

    /// Clears the contact's pending mark and sets `confirmed_at` to `now`.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn confirm_contact(
        &mut self,
        account: AccountId,
        contact: ContactId,
        now: Timestamp,
    ) -> Result<(), StoreError>;

    /// Removes the contact's unsubscriptions from `topics`; answers how many there were.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn resubscribe_contact_to_topics(
        &mut self,
        account: AccountId,
        contact: ContactId,
        topics: &[TopicId],
    ) -> Result<u64, StoreError>;

    /// Stores a new confirmation.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn insert_form_confirmation(
        &mut self,
        account: AccountId,
        confirmation: &FormConfirmation,
    ) -> Result<(), StoreError>;

    /// How many confirmations the contact was sent since `since` (any form), read under
    /// a lock on the contact's row, so concurrent posts for one address take turns.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn lock_and_count_form_confirmations(
        &mut self,
        account: AccountId,
        contact: ContactId,
        since: Timestamp,
    ) -> Result<u64, StoreError>;

    /// The confirmation, if it is the account's.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_form_confirmation(
        &mut self,
        account: AccountId,
        id: FormConfirmationId,
    ) -> Result<Option<FormConfirmation>, StoreError>;

    /// Sets the confirmation's `confirmed_at` unless it is set already; `true` when this
    /// call set it (the link's one use).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn use_form_confirmation(
        &mut self,
        account: AccountId,
        id: FormConfirmationId,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Deletes the contact's confirmations made before `before` (expired links, so the
    /// table keeps only what can still be used or counted).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn prune_form_confirmations(
        &mut self,
        account: AccountId,
        contact: ContactId,
        before: Timestamp,
    ) -> Result<(), StoreError>;
}
