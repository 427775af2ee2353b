use mailroom_domain::{
    account::{check_member_change, Member, MemberChangeRefusal},
    email::EmailAddress,
    AccountId, UserId,
};

use super::members::{lock_pair, member_of, refusal};
use crate::{auth, ports::in_transaction, AppError, Services};

/// Removes a member from the caller's account and returns the membership removed. The
/// owner and admins remove anyone but the owner; any other member may remove only
/// themselves (leave). The removed user's tokens get 401 on the account from their next
/// request, since membership is checked at every request.
///
/// # Errors
/// [`AppError::Forbidden`] for a member removing someone else; [`AppError::NotFound`]
/// when the user is not a member; [`AppError::BadRequest`] for the owner.
pub fn remove_member(
    services: &Services,
    member: &auth::Member,
    target: UserId,
) -> Result<Member, AppError> {
    remove(services, member.account(), Some(member.user_id()), target)
}

/// The operator's `mailroom member remove`: the user with this email leaves the account.
///
/// # Errors
/// [`AppError::Invalid`] naming `email` for a bad address; [`AppError::NotFound`] for an
/// unknown account or a user who is not a member; [`AppError::BadRequest`] for the owner.
pub fn operator_remove_member(
    services: &Services,
    account: AccountId,
    email: &str,
) -> Result<Member, AppError> {
    let email =
        EmailAddress::parse(email).map_err(|e| AppError::invalid("email", e.to_string()))?;
    let user = in_transaction(services.db.as_ref(), |tx| {
        tx.find_user_by_email(email.as_str())?
            .ok_or(AppError::NotFound)
    })?;
    remove(services, account, None, user.id)
}

fn remove(
    services: &Services,
    account: AccountId,
    by: Option<UserId>,
    target: UserId,
) -> Result<Member, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        let (acting, current) = lock_pair(tx, account, by, target)?;
        check_member_change(acting, current, by == Some(target)).map_err(refusal)?;
        let removed = member_of(tx, account, target)?;
        // The statement keeps the owner whatever was checked: refused as the check does.
        if !tx.delete_membership(account, target)? {
            return Err(refusal(MemberChangeRefusal::OwnerStays));
        }
        Ok(removed)
    })
    .inspect(|_| {
        // After the commit: a request between an eviction and the commit would cache
        // the old membership again.
        services.membership_cache.evict(&(account, target));
    })
}
