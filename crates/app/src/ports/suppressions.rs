use mailroom_domain::{
    paging::PageRequest,
    suppression::{AddressHash, SuppressionEntry, SuppressionReason},
    AccountId, ContactId, Timestamp, TopicId,
};

use super::SealedSecret;
use crate::StoreError;

/// The account's suppression list and the key its address hashes are made with.
pub trait SuppressionRepository {
    /// The account's sealed address key, if it has one yet.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn suppression_key(&mut self, account: AccountId) -> Result<Option<SealedSecret>, StoreError>;

    /// Stores `sealed` as the account's address key unless it has one; `false` when a
    /// key was there already (made concurrently: read it again and use that one).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn insert_suppression_key(
        &mut self,
        account: AccountId,
        sealed: &SealedSecret,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Adds each entry unless the address is listed for that reason already (the first
    /// entry of a reason is kept, with its date and source); returns how many were new.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn add_suppressions(
        &mut self,
        account: AccountId,
        entries: &[SuppressionEntry],
    ) -> Result<u64, StoreError>;

    /// The reasons each of `hashes` is listed for (one pair per entry; addresses that are
    /// not listed are absent). One statement for the whole set.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn suppression_reasons(
        &mut self,
        account: AccountId,
        hashes: &[AddressHash],
    ) -> Result<Vec<(AddressHash, SuppressionReason)>, StoreError>;

    /// One page of the list, newest first, of one reason or all.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn list_suppressions(
        &mut self,
        account: AccountId,
        reason: Option<SuppressionReason>,
        page: PageRequest,
    ) -> Result<Vec<SuppressionEntry>, StoreError>;

    /// Up to `limit` entries after `after` (exclusive) in key order (address hash, then
    /// reason), for an export that pages by key rather than by offset.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn suppressions_after(
        &mut self,
        account: AccountId,
        after: Option<(AddressHash, SuppressionReason)>,
        limit: u32,
    ) -> Result<Vec<SuppressionEntry>, StoreError>;

    /// How many entries the list holds, of one reason or all.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn count_suppressions(
        &mut self,
        account: AccountId,
        reason: Option<SuppressionReason>,
    ) -> Result<u64, StoreError>;

    /// The entries of one address, in reason order.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_suppressions(
        &mut self,
        account: AccountId,
        hash: AddressHash,
    ) -> Result<Vec<SuppressionEntry>, StoreError>;

    /// Removes the address's entries of `reasons` and returns those it removed.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn remove_suppressions(
        &mut self,
        account: AccountId,
        hash: AddressHash,
        reasons: &[SuppressionReason],
    ) -> Result<Vec<SuppressionEntry>, StoreError>;

    /// Drops the address in clear and the detail (which may quote it) from the address's
    /// entries, keeping the hash, the reasons and the dates: an erased person stays
    /// suppressed without being named.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn forget_suppressed_address(
        &mut self,
        account: AccountId,
        hash: AddressHash,
    ) -> Result<(), StoreError>;

    /// Clears the marks that `reasons` stand for (hard bounce, complaint, unsubscription
    /// from everything) on the account's live contact of `normalized_email`, if any, so
    /// that an address taken off the list can be mailed again.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn clear_contact_marks(
        &mut self,
        account: AccountId,
        normalized_email: &str,
        reasons: &[SuppressionReason],
    ) -> Result<(), StoreError>;

    /// Keeps the topic unsubscriptions of `contact` under its address's `hash`, so that
    /// they outlive the contact (called before it is deleted); returns how many were new.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn keep_topic_unsubscriptions(
        &mut self,
        account: AccountId,
        contact: ContactId,
        hash: AddressHash,
    ) -> Result<u64, StoreError>;

    /// The kept topic unsubscriptions of `hashes`, with the time each was made. One
    /// statement for the whole set.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn kept_topic_unsubscriptions(
        &mut self,
        account: AccountId,
        hashes: &[AddressHash],
    ) -> Result<Vec<(AddressHash, TopicId, Timestamp)>, StoreError>;

    /// Gives kept topic unsubscriptions back to live contacts (`restored`: contact,
    /// topic, when it was made) and drops every kept one of `hashes`.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn restore_topic_unsubscriptions(
        &mut self,
        account: AccountId,
        restored: &[(ContactId, TopicId, Timestamp)],
        hashes: &[AddressHash],
    ) -> Result<(), StoreError>;
}
