use mailroom_domain::{
    account::{check_member_change, Member, Role},
    email::EmailAddress,
    AccountId, UserId, ValidationErrors,
};

use super::members::{authority, member_of, refusal};
use crate::{
    auth,
    ports::{in_transaction, UserRecord},
    AppError, Duplicate, Services, StoreError,
};

/// The raw body of `POST …/members`.
#[derive(Debug, Clone, Default)]
pub struct AddMemberRequest {
    /// `email`: the user to add, created when unknown.
    pub email: Option<String>,
    /// `role`: `admin` or `member`.
    pub role: Option<String>,
}

/// Adds a user to the caller's account; the caller must be its owner or an admin. A user
/// with an unknown email is created (without a token: they get one from an operator).
///
/// # Errors
/// [`AppError::Forbidden`] for a caller who manages no members; [`AppError::Invalid`]
/// naming `email` or `role` for a bad value or a user who is already a member.
pub fn add_member(
    services: &Services,
    member: &auth::Member,
    request: AddMemberRequest,
) -> Result<Member, AppError> {
    add(services, member.account(), Some(member.user_id()), request)
}

/// The operator's `mailroom member add`: as [`add_member`], with no caller to check.
///
/// # Errors
/// As [`add_member`], and [`AppError::NotFound`] for an unknown account.
pub fn operator_add_member(
    services: &Services,
    account: AccountId,
    request: AddMemberRequest,
) -> Result<Member, AppError> {
    add(services, account, None, request)
}

fn add(
    services: &Services,
    account: AccountId,
    by: Option<UserId>,
    request: AddMemberRequest,
) -> Result<Member, AppError> {
    let mut errors = ValidationErrors::new();
    let email = match request.email.as_deref() {
        None => {
            errors.push("email", "is required");
            None
        }
        Some(email) => errors.collect("email", EmailAddress::parse(email)),
    };
    let role = match request.role.as_deref() {
        None => {
            errors.push("role", "is required");
            None
        }
        Some(role) => errors.collect("role", Role::parse_assignable(role)),
    };
    errors.into_result()?;
    let (Some(email), Some(role)) = (email, role) else {
        return Err(AppError::Internal(
            "validated member request lost a field".into(),
        ));
    };
    let now = services.clock.now();
    let candidate = UserRecord {
        id: UserId::from_uuid(services.ids.next_uuid()),
        email: email.as_str().to_owned(),
        created_at: now,
    };
    in_transaction(services.db.as_ref(), |tx| {
        let acting = authority(tx, account, by)?;
        // Adding is a change to a new `member`: the same rule as changing one.
        check_member_change(acting, Role::Member, false).map_err(refusal)?;
        let user = match tx.find_user_by_email(email.as_str())? {
            Some(user) => user.id,
            None => match tx.insert_user(&candidate) {
                Ok(()) => candidate.id,
                Err(StoreError::Duplicate(Duplicate::UserEmail)) => {
                    return Err(AppError::BadRequest(
                        "a user with this email was created concurrently; retry".into(),
                    ))
                }
                Err(other) => return Err(other.into()),
            },
        };
        if !tx.insert_membership(account, user, role, now)? {
            return Err(AppError::invalid(
                "email",
                "is already a member of this account",
            ));
        }
        member_of(tx, account, user)
    })
}
