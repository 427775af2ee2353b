//! What the member use cases share: the acting member's authority, read under a row lock.

use mailroom_domain::{
    account::{Member, MemberChangeRefusal, Role},
    AccountId, UserId,
};

use crate::{ports::UnitOfWork, AppError};

/// The acting member's role, locked for the transaction so a concurrent demotion of the
/// caller waits for this change (or this change sees it); `None` for the operator. An
/// operator naming an unknown account gets 404.
pub(super) fn authority(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    by: Option<UserId>,
) -> Result<Option<Role>, AppError> {
    match by {
        Some(user) => {
            let locked = tx.lock_memberships(account, &[user])?;
            // Removed since the request's membership check: as if removed first.
            let (_, role) = locked.first().copied().ok_or(AppError::Unauthorized)?;
            Ok(Some(role))
        }
        None => {
            tx.find_account(account)?.ok_or(AppError::NotFound)?;
            Ok(None)
        }
    }
}

/// The 403 or 400 of a refused change.
pub(super) fn refusal(refusal: MemberChangeRefusal) -> AppError {
    match refusal {
        MemberChangeRefusal::NotAManager => AppError::Forbidden(refusal.to_string()),
        MemberChangeRefusal::OwnerStays => AppError::BadRequest(refusal.to_string()),
    }
}

/// The member as the list shows it.
pub(super) fn member_of(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    user: UserId,
) -> Result<Member, AppError> {
    tx.list_members(account)?
        .into_iter()
        .find(|member| member.user_id == user)
        .ok_or(AppError::NotFound)
}

/// Locks the acting member's and the target's memberships together (in user id order)
/// and returns (acting role, target role); the target missing is 404.
pub(super) fn lock_pair(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    by: Option<UserId>,
    target: UserId,
) -> Result<(Option<Role>, Role), AppError> {
    let Some(by) = by else {
        tx.find_account(account)?.ok_or(AppError::NotFound)?;
        let locked = tx.lock_memberships(account, &[target])?;
        let (_, role) = locked.first().copied().ok_or(AppError::NotFound)?;
        return Ok((None, role));
    };
    let locked = tx.lock_memberships(account, &[by, target])?;
    let role_of = |user: UserId| {
        locked
            .iter()
            .find(|(id, _)| *id == user)
            .map(|(_, role)| *role)
    };
    let acting = role_of(by).ok_or(AppError::Unauthorized)?;
    let target = role_of(target).ok_or(AppError::NotFound)?;
    Ok((Some(acting), target))
}
