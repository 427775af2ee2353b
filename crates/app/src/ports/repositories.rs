use mailroom_domain::{
    account::{Member, Role},
    automation::NewAutomation,
    token::TokenHash,
    AccountId, AutomationId, TemplateId, Timestamp, TokenId, UserId,
};

use super::{AccountRecord, NewTokenRecord, StoredWebhookConfig, TokenRecord, UserRecord};
use crate::StoreError;

/// Users.
pub trait UserRepository {
    /// The user with this email, compared case-insensitively.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_user_by_email(&mut self, email: &str) -> Result<Option<UserRecord>, StoreError>;

    /// Stores a new user.
    ///
    /// # Errors
    /// [`StoreError::Duplicate`] ([`Duplicate::UserEmail`](crate::Duplicate)) when the email is
    /// taken (case-insensitively).
    fn insert_user(&mut self, user: &UserRecord) -> Result<(), StoreError>;
}

/// Personal access tokens.
pub trait TokenRepository {
    /// Stores a new token.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn insert_token(&mut self, token: &NewTokenRecord) -> Result<(), StoreError>;

    /// The token with this hash, revoked or not.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_token_by_hash(&mut self, hash: &TokenHash) -> Result<Option<TokenRecord>, StoreError>;

    /// The user's tokens that are not revoked, oldest first.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn list_active_tokens(&mut self, user: UserId) -> Result<Vec<TokenRecord>, StoreError>;

    /// Sets `last_used_at = now` unless it was written after `not_after` (the throttle).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn touch_token(
        &mut self,
        id: TokenId,
        now: Timestamp,
        not_after: Timestamp,
    ) -> Result<(), StoreError>;

    /// Revokes the user's token and returns it; `None` when the user has no such
    /// unrevoked token.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn revoke_token(
        &mut self,
        user: UserId,
        id: TokenId,
        now: Timestamp,
    ) -> Result<Option<TokenRecord>, StoreError>;
}

/// Accounts, memberships and webhook configurations.
pub trait AccountRepository {
    /// Stores a new account with `owner` as its owner.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn insert_account(&mut self, account: &AccountRecord, owner: UserId) -> Result<(), StoreError>;

    /// How many accounts `owner` owns, read after taking a lock (to the end of the
    /// transaction) that every other call for the same owner waits for, so two
    /// concurrent creations cannot both pass a bound on the count.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn lock_and_count_owned_accounts(&mut self, owner: UserId) -> Result<u64, StoreError>;

    /// The account, if it exists.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_account(&mut self, id: AccountId) -> Result<Option<AccountRecord>, StoreError>;

    /// The accounts `user` belongs to, oldest first.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn list_accounts_of(&mut self, user: UserId) -> Result<Vec<AccountRecord>, StoreError>;

    /// Writes name and tracking defaults back.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn update_account(&mut self, account: &AccountRecord) -> Result<(), StoreError>;

    /// The user's role in the account, or `None` when not a member (or no such account).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn member_role(&mut self, account: AccountId, user: UserId)
        -> Result<Option<Role>, StoreError>;

    /// Every member of the account, oldest membership first.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn list_members(&mut self, account: AccountId) -> Result<Vec<Member>, StoreError>;

    /// Locks the memberships of `users` in the account (`FOR UPDATE`, in user id order so
    /// two transactions locking the same pair cannot deadlock) and returns their roles;
    /// users who are not members are left out.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn lock_memberships(
        &mut self,
        account: AccountId,
        users: &[UserId],
    ) -> Result<Vec<(UserId, Role)>, StoreError>;

    /// Adds `user` to the account with `role`; `false` when already a member (nothing
    /// changes then).
    ///
    /// # Errors
    /// [`StoreError::BrokenReference`] for an unknown account or user.
    fn insert_membership(
        &mut self,
        account: AccountId,
        user: UserId,
        role: Role,
        at: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Sets a member's role; `false` when nothing changed because the user is the owner
    /// (whose role never changes, whatever the caller checked) or no member.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn set_member_role(
        &mut self,
        account: AccountId,
        user: UserId,
        role: Role,
    ) -> Result<bool, StoreError>;

    /// Removes a member; `false` when nothing was removed because the user is the owner
    /// (who stays for the account's life, whatever the caller checked) or no member.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn delete_membership(&mut self, account: AccountId, user: UserId) -> Result<bool, StoreError>;

    /// The account's webhook configuration, if set.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_webhook_config(
        &mut self,
        account: AccountId,
    ) -> Result<Option<StoredWebhookConfig>, StoreError>;

    /// Inserts or replaces the account's webhook configuration.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn save_webhook_config(
        &mut self,
        account: AccountId,
        config: &StoredWebhookConfig,
        now: Timestamp,
    ) -> Result<(), StoreError>;
}

/// The writes account creation needs beyond templates and topics (which have their own
/// repositories): the sample automation. The automations issue brings the full repository.
pub trait StarterDataRepository {
    /// Stores an automation that sends `template`.
    ///
    /// # Errors
    /// [`StoreError::BrokenReference`] when the template is not in the account.
    fn insert_automation(
        &mut self,
        account: AccountId,
        id: AutomationId,
        template: TemplateId,
        automation: &NewAutomation,
        now: Timestamp,
    ) -> Result<(), StoreError>;

    /// How many templates, automations and topics the account holds.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn count_starter_records(&mut self, account: AccountId) -> Result<(u64, u64, u64), StoreError>;
}
