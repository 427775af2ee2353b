//! Who is calling, and whether they may act on an account.
//!
//! Tenancy is a type: every account-scoped use case takes a [`Member`], and the only way to
//! get one is [`verify_membership`]. A driving adapter therefore cannot call such a use
//! case for a caller whose membership it forgot to check.

use mailroom_domain::{account::Role, token::TokenScope, AccountId, TokenId, UserId};
use time::Duration;

use crate::{ports::in_transaction, ttl_cache::TtlCache, AppError, Services};

/// How long a looked-up membership (and its role) is trusted without reading it again.
pub const MEMBERSHIP_CACHE_TTL: Duration = Duration::seconds(5);
/// The default bound on cached memberships.
pub const MEMBERSHIP_CACHE_CAPACITY: usize = 10_000;

/// Recently proven memberships, (account, user) → role, shared by every request of a
/// process, so an account-scoped request needs no transaction of its own to prove one.
/// Only memberships that exist are cached; removing a member or changing a role through
/// this process's use cases evicts at once, elsewhere within [`MEMBERSHIP_CACHE_TTL`]
/// (docs/operations.md, "Token and membership caches").
#[derive(Debug)]
pub struct MembershipCache(TtlCache<(AccountId, UserId), Role>);

impl Default for MembershipCache {
    fn default() -> Self {
        Self(TtlCache::new(
            MEMBERSHIP_CACHE_TTL,
            MEMBERSHIP_CACHE_CAPACITY,
        ))
    }
}

impl std::ops::Deref for MembershipCache {
    type Target = TtlCache<(AccountId, UserId), Role>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// An authenticated caller: a user acting through one of their tokens, or through a
/// console session (`crate::console`), which carries the scope and pins of the token it
/// was opened with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// The user the token acts for.
    pub user_id: UserId,
    /// The token used: the presented one, or the one a console session was opened with;
    /// `None` for a console session opened with a login link.
    pub token_id: Option<TokenId>,
    /// What the token may call.
    pub scope: TokenScope,
    /// The accounts the token is pinned to; `None` for every account of its user.
    pub account_ids: Option<Vec<AccountId>>,
}

impl Actor {
    /// Whether the token may reach `account` at all (its pins allow it).
    #[must_use]
    pub fn may_reach(&self, account: AccountId) -> bool {
        self.account_ids
            .as_ref()
            .is_none_or(|pins| pins.contains(&account))
    }
}

/// The request being authorised: method, path as received, query string without `?`.
/// The scope check reads the one table of the domain
/// ([`mailroom_domain::token::SENDING_ROUTES`]).
#[derive(Debug, Clone, Copy)]
pub struct RouteCall<'a> {
    /// HTTP method.
    pub method: &'a str,
    /// Path, from `/v2`.
    pub path: &'a str,
    /// Query string, without the `?`.
    pub query: &'a str,
}

fn check_scope(scope: TokenScope, call: RouteCall<'_>) -> Result<(), AppError> {
    if scope.allows(call.method, call.path, call.query) {
        Ok(())
    } else {
        Err(AppError::Forbidden(format!(
            "a token of scope {} may not call {} {}",
            scope.as_str(),
            call.method,
            call.path
        )))
    }
}

/// Checks that the caller's token scope allows a route outside any account (tokens,
/// accounts). Nothing is read from the store.
///
/// # Errors
/// [`AppError::Forbidden`] naming the scope when it does not.
pub fn authorize_caller(actor: &Actor, call: RouteCall<'_>) -> Result<(), AppError> {
    check_scope(actor.scope, call)
}

/// Proof that an authenticated caller is a member of one account. Its fields are private:
/// outside this crate a `Member` comes only from [`verify_membership`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    account: AccountId,
    user_id: UserId,
    token_id: Option<TokenId>,
    scope: TokenScope,
    role: Role,
}

impl Member {
    /// The account the caller is a member of.
    #[must_use]
    pub fn account(&self) -> AccountId {
        self.account
    }

    /// The user behind the caller's token.
    #[must_use]
    pub fn user_id(&self) -> UserId {
        self.user_id
    }

    /// The token the caller used (see [`Actor::token_id`]).
    #[must_use]
    pub fn token_id(&self) -> Option<TokenId> {
        self.token_id
    }

    /// The scope of the caller's token, already checked against the route.
    #[must_use]
    pub fn scope(&self) -> TokenScope {
        self.scope
    }

    /// The caller's role in the account.
    #[must_use]
    pub fn role(&self) -> Role {
        self.role
    }
}

/// Checks that `actor` may act on `account` for `call`, in its own short transaction, and
/// returns the proof: the token is pinned to the account (or to none), its user is a
/// member, and its scope allows the route. An unknown account, a foreign account and an
/// account outside the token's pins look the same to the caller: 401, so account ids
/// cannot be probed; only then does a scope that does not allow the route get 403.
///
/// Membership is checked at every request, before the request's own transaction, from
/// the [`MembershipCache`] when this process proved it in the last few seconds: a member
/// removed through this process is refused at their next request, one removed elsewhere
/// (another replica, the CLI) within [`MEMBERSHIP_CACHE_TTL`].
///
/// # Errors
/// [`AppError::Unauthorized`] when the token may not reach the account or its user is
/// not a member; [`AppError::Forbidden`] when its scope does not allow the route.
pub fn verify_membership(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    call: RouteCall<'_>,
) -> Result<Member, AppError> {
    if !actor.may_reach(account) {
        return Err(AppError::Unauthorized);
    }
    let key = (account, actor.user_id);
    let now = services.clock.now();
    let role = match services.membership_cache.get(&key, now) {
        Some(role) => role,
        None => {
            let role = in_transaction(services.db.as_ref(), |tx| {
                tx.member_role(account, actor.user_id)?
                    .ok_or(AppError::Unauthorized)
            })?;
            services.membership_cache.put(key, role, now);
            role
        }
    };
    check_scope(actor.scope, call)?;
    Ok(Member {
        account,
        user_id: actor.user_id,
        token_id: actor.token_id,
        scope: actor.scope,
        role,
    })
}
