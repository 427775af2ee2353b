//! Who is calling, and whether they may act on an account.
//!
//! Tenancy is a type: every account-scoped use case takes a [`Member`], and the only way to
//! get one is [`verify_membership`]. A driving adapter therefore cannot call such a use
//! case for a caller whose membership it forgot to check.

use mailroom_domain::{account::Role, AccountId, TokenId, UserId};

use crate::{ports::in_transaction, AppError, Services};

/// An authenticated caller: a user acting through one of their tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Actor {
    /// The user the token acts for.
    pub user_id: UserId,
    /// The token used.
    pub token_id: TokenId,
}

/// Proof that an authenticated caller is a member of one account. Its fields are private:
/// outside this crate a `Member` comes only from [`verify_membership`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    account: AccountId,
    actor: Actor,
    role: Role,
}

impl Member {
    /// The account the caller is a member of.
    #[must_use]
    pub fn account(&self) -> AccountId {
        self.account
    }

    /// The caller.
    #[must_use]
    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    /// The user behind the caller's token.
    #[must_use]
    pub fn user_id(&self) -> UserId {
        self.actor.user_id
    }

    /// The token the caller used.
    #[must_use]
    pub fn token_id(&self) -> TokenId {
        self.actor.token_id
    }

    /// The caller's role in the account.
    #[must_use]
    pub fn role(&self) -> Role {
        self.role
    }
}

/// Checks that `actor` is a member of `account`, in its own short transaction, and returns
/// the proof. An unknown account and a foreign account look the same to the caller: 401,
/// so account ids cannot be probed.
///
/// Membership is checked once per request, before the request's own transaction; no route
/// removes a member, so the proof cannot go stale within a request.
///
/// # Errors
/// [`AppError::Unauthorized`] when the actor is not a member.
pub fn verify_membership(
    services: &Services,
    actor: &Actor,
    account: AccountId,
) -> Result<Member, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        let role = tx
            .member_role(account, actor.user_id)?
            .ok_or(AppError::Unauthorized)?;
        Ok(Member {
            account,
            actor: *actor,
            role,
        })
    })
}
