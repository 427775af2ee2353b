use mailroom_domain::{
    mail_server::MailServer, paging::PageRequest, AccountId, MailServerId, Timestamp,
};

use super::SealedSecret;
use crate::StoreError;

/// A mail server as stored: the API view plus the sealed password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailServerRecord {
    /// What the API shows.
    pub server: MailServer,
    /// The sealed SMTP password.
    pub password: SealedSecret,
}

/// Mail servers.
pub trait MailServerRepository {
    /// One page of the account's mail servers, oldest first.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn list_mail_servers(
        &mut self,
        account: AccountId,
        page: PageRequest,
    ) -> Result<Vec<MailServerRecord>, StoreError>;

    /// How many mail servers the account holds.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn count_mail_servers(&mut self, account: AccountId) -> Result<u64, StoreError>;

    /// The mail server, if it is the account's.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_mail_server(
        &mut self,
        account: AccountId,
        id: MailServerId,
    ) -> Result<Option<MailServerRecord>, StoreError>;

    /// Stores a new mail server.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn insert_mail_server(
        &mut self,
        account: AccountId,
        record: &MailServerRecord,
    ) -> Result<(), StoreError>;

    /// Replaces every setting of an existing mail server; `false` when there was none.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn update_mail_server(
        &mut self,
        account: AccountId,
        record: &MailServerRecord,
    ) -> Result<bool, StoreError>;

    /// Marks the server unhealthy because it refused Mailroom itself (AUTH, the session),
    /// keeping an earlier `unhealthy_since` and replacing the last error, but only while
    /// its settings are still those of `version` (`updated_at`): a fault of settings
    /// saved over since says nothing about the new ones. Returns since when the server
    /// is unhealthy; `None` when it is gone or was saved again.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn mark_mail_server_unhealthy(
        &mut self,
        account: AccountId,
        id: MailServerId,
        version: Timestamp,
        now: Timestamp,
        error: &str,
    ) -> Result<Option<Timestamp>, StoreError>;

    /// Clears the server's unhealthy mark (a session worked); `false` when it had none.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn mark_mail_server_healthy(
        &mut self,
        account: AccountId,
        id: MailServerId,
    ) -> Result<bool, StoreError>;

    /// Deletes the mail server; `false` when there was none.
    ///
    /// # Errors
    /// [`StoreError::BrokenReference`] while a template prefers it.
    fn delete_mail_server(
        &mut self,
        account: AccountId,
        id: MailServerId,
    ) -> Result<bool, StoreError>;

    /// Slugs of the templates that prefer this mail server.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn templates_preferring(
        &mut self,
        account: AccountId,
        server: MailServerId,
    ) -> Result<Vec<String>, StoreError>;
}
