//! The admin console's sessions and login links (`docs/console.md`).

use mailroom_domain::{
    console::ConsoleSecretHash, token::TokenScope, AccountId, ConsoleSessionId, Timestamp, TokenId,
    UserId, Uuid,
};

use crate::StoreError;

/// A signed-in browser, without the cookie value (only its hash is stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSessionRecord {
    /// Id.
    pub id: ConsoleSessionId,
    /// The user signed in.
    pub user_id: UserId,
    /// The synchronizer token every state-changing form of this session carries.
    pub csrf_token: String,
    /// The token the session was opened with; `None` for a login link.
    pub token_id: Option<TokenId>,
    /// What the session may do (its token's scope, or full for a login link).
    pub scope: TokenScope,
    /// The accounts it is pinned to (its token's pins); `None` for every account.
    pub account_ids: Option<Vec<AccountId>>,
    /// The browser's `User-Agent`, cut to 200 characters, so a user can tell sessions apart.
    pub user_agent: String,
    /// Sign-in time.
    pub created_at: Timestamp,
    /// End of the session.
    pub expires_at: Timestamp,
    /// Sign-out or revocation time.
    pub revoked_at: Option<Timestamp>,
}

/// Sessions and login links.
pub trait ConsoleRepository {
    /// Stores a new session under the hash of its cookie value.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn insert_console_session(
        &mut self,
        session: &ConsoleSessionRecord,
        secret_hash: &ConsoleSecretHash,
    ) -> Result<(), StoreError>;

    /// The session with this cookie hash that is neither revoked nor expired at `now`, and
    /// whose token (if it was opened with one) is neither revoked nor expired either.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_live_console_session(
        &mut self,
        secret_hash: &ConsoleSecretHash,
        now: Timestamp,
    ) -> Result<Option<ConsoleSessionRecord>, StoreError>;

    /// The user's sessions that are neither revoked nor expired at `now`, newest first.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn list_live_console_sessions(
        &mut self,
        user: UserId,
        now: Timestamp,
    ) -> Result<Vec<ConsoleSessionRecord>, StoreError>;

    /// Revokes the user's session; `false` when the user has no such live session.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn revoke_console_session(
        &mut self,
        user: UserId,
        id: ConsoleSessionId,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Stores a login link under the hash of its secret.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn insert_login_link(
        &mut self,
        id: Uuid,
        user: UserId,
        secret_hash: &ConsoleSecretHash,
        created_at: Timestamp,
        expires_at: Timestamp,
    ) -> Result<(), StoreError>;

    /// Marks the unused, unexpired link with this hash used at `now` and returns its user;
    /// `None` when there is no such link (unknown, used or expired). Of two concurrent
    /// uses, one gets the user.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn use_login_link(
        &mut self,
        secret_hash: &ConsoleSecretHash,
        now: Timestamp,
    ) -> Result<Option<UserId>, StoreError>;
}
