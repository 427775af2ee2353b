use mailroom_domain::{
    automation::{Automation, NewAutomation},
    paging::PageRequest,
    slug::EventSlug,
    template::Template,
    AccountId, AutomationId, ContactId, TemplateId, Timestamp,
};

use crate::StoreError;

/// Automations beyond the starter insert (which is
/// [`StarterDataRepository::insert_automation`](super::StarterDataRepository::insert_automation)).
pub trait AutomationRepository {
    /// The automation, if it is the account's.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_automation(
        &mut self,
        account: AccountId,
        id: AutomationId,
    ) -> Result<Option<Automation>, StoreError>;

    /// One page of the account's automations, oldest first, each with its template
    /// (`None` cannot happen while the foreign key holds, but the join is outer).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn list_automations(
        &mut self,
        account: AccountId,
        page: PageRequest,
    ) -> Result<Vec<(Automation, Option<Template>)>, StoreError>;

    /// How many automations the account holds.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn count_automations(&mut self, account: AccountId) -> Result<u64, StoreError>;

    /// Replaces everything but the id and creation time; `false` when there is no such
    /// automation.
    ///
    /// # Errors
    /// [`StoreError::BrokenReference`] when the template is not in the account.
    fn update_automation(
        &mut self,
        account: AccountId,
        id: AutomationId,
        template: TemplateId,
        settings: &NewAutomation,
    ) -> Result<bool, StoreError>;

    /// Deletes the automation (its `once` history with it) and returns it.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn delete_automation(
        &mut self,
        account: AccountId,
        id: AutomationId,
    ) -> Result<Option<Automation>, StoreError>;

    /// The account's enabled automations triggered by `slug`.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn enabled_automations_for(
        &mut self,
        account: AccountId,
        slug: &EventSlug,
    ) -> Result<Vec<Automation>, StoreError>;

    /// Records that `automation` fired for `contact` and returns `true`, or returns
    /// `false` when it fired for the contact before. A concurrent transaction recording
    /// the same pair makes this one wait and then answer `false`: the unique key is the
    /// guarantee of `once`.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn record_first_firing(
        &mut self,
        account: AccountId,
        automation: AutomationId,
        contact: ContactId,
        now: Timestamp,
    ) -> Result<bool, StoreError>;
}
