use mailroom_domain::{
    account::{check_member_change, Member, MemberChangeRefusal, Role},
    UserId,
};

use super::members::{lock_pair, member_of, refusal};
use crate::{auth, ports::in_transaction, AppError, Services};

/// Sets a member's role (`admin` or `member`); the caller must be the owner or an admin,
/// and the owner's role never changes.
///
/// # Errors
/// [`AppError::Invalid`] naming `role` for a missing or bad role;
/// [`AppError::Forbidden`] for a caller who manages no members; [`AppError::NotFound`]
/// when the user is not a member; [`AppError::BadRequest`] for the owner.
pub fn change_member_role(
    services: &Services,
    member: &auth::Member,
    target: UserId,
    role: Option<String>,
) -> Result<Member, AppError> {
    let role = match role.as_deref() {
        None => return Err(AppError::invalid("role", "is required")),
        Some(role) => {
            Role::parse_assignable(role).map_err(|e| AppError::invalid("role", e.to_string()))?
        }
    };
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let (acting, current) = lock_pair(tx, account, Some(member.user_id()), target)?;
        check_member_change(acting, current, false).map_err(refusal)?;
        // The statement keeps the owner whatever was checked: refused as the check does.
        if !tx.set_member_role(account, target, role)? {
            return Err(refusal(MemberChangeRefusal::OwnerStays));
        }
        member_of(tx, account, target)
    })
    .inspect(|_| {
        // After the commit: a request between an eviction and the commit would cache
        // the old role again.
        services.membership_cache.evict(&(account, target));
    })
}
