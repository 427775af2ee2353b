use mailroom_domain::{paging::PageRequest, topic::Topic, AccountId, TopicId};

use crate::StoreError;

/// Announcement topics.
pub trait TopicRepository {
    /// One page of the account's topics, oldest first.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn list_topics(
        &mut self,
        account: AccountId,
        page: PageRequest,
    ) -> Result<Vec<Topic>, StoreError>;

    /// How many topics the account holds.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn count_topics(&mut self, account: AccountId) -> Result<u64, StoreError>;

    /// The topic, if it is the account's.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_topic(&mut self, account: AccountId, id: TopicId) -> Result<Option<Topic>, StoreError>;

    /// Stores a new topic.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn insert_topic(&mut self, account: AccountId, topic: &Topic) -> Result<(), StoreError>;

    /// Writes name and description back.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn update_topic(&mut self, account: AccountId, topic: &Topic) -> Result<(), StoreError>;

    /// Deletes the topic; `false` when there was none.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn delete_topic(&mut self, account: AccountId, id: TopicId) -> Result<bool, StoreError>;
}
