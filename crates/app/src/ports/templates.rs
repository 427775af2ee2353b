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
}
