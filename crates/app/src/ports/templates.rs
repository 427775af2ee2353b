use mailroom_domain::{paging::PageRequest, template::Template, AccountId, TemplateId};

use crate::StoreError;

/// Templates.
pub trait TemplateRepository {
    /// One page of the account's templates, oldest first.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn list_templates(
        &mut self,
        account: AccountId,
        page: PageRequest,
    ) -> Result<Vec<Template>, StoreError>;

    /// How many templates the account holds.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn count_templates(&mut self, account: AccountId) -> Result<u64, StoreError>;

    /// The template, if it is the account's.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_template(
        &mut self,
        account: AccountId,
        id: TemplateId,
    ) -> Result<Option<Template>, StoreError>;

    /// The account's template with this slug.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_template_by_slug(
        &mut self,
        account: AccountId,
        slug: &str,
    ) -> Result<Option<Template>, StoreError>;

    /// Stores a new template.
    ///
    /// # Errors
    /// [`StoreError::Duplicate`] ([`Duplicate::TemplateSlug`](crate::Duplicate)) when the slug is
    /// taken in the account; [`StoreError::BrokenReference`] when the preferred mail
    /// server is not the account's.
    fn insert_template(
        &mut self,
        account: AccountId,
        template: &Template,
    ) -> Result<(), StoreError>;

    /// Writes every field of an existing template back.
    ///
    /// # Errors
    /// As [`TemplateRepository::insert_template`].
    fn update_template(
        &mut self,
        account: AccountId,
        template: &Template,
    ) -> Result<(), StoreError>;

    /// Deletes the template; `false` when there was none.
    ///
    /// # Errors
    /// [`StoreError::BrokenReference`] while an automation sends it.
    fn delete_template(&mut self, account: AccountId, id: TemplateId) -> Result<bool, StoreError>;

    /// Names of the automations that send this template.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn automations_sending(
        &mut self,
        account: AccountId,
        template: TemplateId,
    ) -> Result<Vec<String>, StoreError>;
}
