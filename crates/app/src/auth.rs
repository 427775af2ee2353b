//! Who is calling, and whether they may act on an account.

use mailroom_domain::{account::Role, AccountId, TokenId, UserId};

use crate::{ports::UnitOfWork, AppError};

/// An authenticated caller: a user acting through one of their tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Actor {
    /// The user the token acts for.
    pub user_id: UserId,
    /// The token used.
    pub token_id: TokenId,
}

/// Checks that `actor` is a member of `account`. An unknown account and a foreign account
/// look the same to the caller: 401, so account ids cannot be probed.
///
/// # Errors
/// [`AppError::Unauthorized`] when the actor is not a member.
pub fn require_member(
    tx: &mut dyn UnitOfWork,
    actor: &Actor,
    account: AccountId,
) -> Result<Role, AppError> {
    tx.member_role(account, actor.user_id)?
        .ok_or(AppError::Unauthorized)
}
