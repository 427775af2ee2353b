use mailroom_domain::{
    attribute::AttributeValue, email::EmailAddress, AccountId, ContactId, Timestamp,
};

use crate::StoreError;

/// One contact of an import batch: the email it is matched by and the custom attributes
/// to merge into it (types already checked against the account's metas).
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedContact {
    /// The email; matched case-insensitively.
    pub email: EmailAddress,
    /// The id the contact gets if it is created.
    pub new_id: ContactId,
    /// Values to write, at most one per slug; other stored attributes are kept.
    pub values: Vec<(String, AttributeValue)>,
}

/// Bulk writes of contact imports: a whole batch in a fixed number of statements, however
/// many rows it has, because one statement per contact cannot reach import speeds.
pub trait ContactImportRepository {
    /// Creates the contacts whose email is unknown, merges every contact's values into its
    /// attributes (replacing earlier values of the same slugs), and keeps the `name`
    /// sort key up to date, as [`ContactRepository::set_attributes`] does. Returns, for
    /// each input in order, whether it was created. Emails must be distinct
    /// case-insensitively within one call.
    ///
    /// [`ContactRepository::set_attributes`]: crate::ports::ContactRepository::set_attributes
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn import_contacts(
        &mut self,
        account: AccountId,
        contacts: &[ImportedContact],
        now: Timestamp,
    ) -> Result<Vec<bool>, StoreError>;
}
