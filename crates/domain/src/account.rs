//! Accounts (workspaces), their names and memberships.

use serde::Serialize;

use crate::{
    branding::{Branding, BrandingPatch},
    webhook::WebhookConfig,
    AccountId, Timestamp, UserId,
};

/// The longest account name accepted.
pub const MAX_ACCOUNT_NAME: usize = 200;

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidName {
    /// Empty or only white space.
    #[error("must not be empty")]
    Empty,
    /// Longer than allowed.
    #[error("must be at most {0} characters")]
    TooLong(usize),
}

/// Trims `text` and checks it holds 1 to `max` characters.
///
/// # Errors
/// [`InvalidName`] when empty after trimming or too long.
pub fn bounded_name(text: &str, max: usize) -> Result<String, InvalidName> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(InvalidName::Empty);
    }
    if trimmed.chars().count() > max {
        return Err(InvalidName::TooLong(max));
    }
    Ok(trimmed.to_owned())
}

/// A workspace name: 1 to 200 characters after trimming.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountName(String);

impl AccountName {
    /// Trims and checks the length.
    ///
    /// # Errors
    /// [`InvalidName`].
    pub fn parse(text: &str) -> Result<Self, InvalidName> {
        bounded_name(text, MAX_ACCOUNT_NAME).map(Self)
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A user's part in an account. The creator is its `owner`, who stays for the account's
/// life; `admin`s manage members like the owner; every member may use every other account
/// path (finer roles are not part of the v2 API).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Created the account; can be neither removed nor demoted.
    Owner,
    /// Manages members.
    Admin,
    /// Uses the account.
    Member,
}

/// A role that members may be given was not `admin` or `member`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be admin or member")]
pub struct InvalidRole;

impl Role {
    /// The stored text form.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Owner => "owner",
            Self::Admin => "admin",
            Self::Member => "member",
        }
    }

    /// Reads the stored text form; unknown text reads as `member`, the lesser role.
    pub fn from_stored(text: &str) -> Self {
        match text {
            "owner" => Self::Owner,
            "admin" => Self::Admin,
            _ => Self::Member,
        }
    }

    /// Reads a role to give a member: `admin` or `member` (an account has one owner, its
    /// creator, so `owner` is never given).
    ///
    /// # Errors
    /// [`InvalidRole`] for anything else.
    pub fn parse_assignable(text: &str) -> Result<Self, InvalidRole> {
        match text {
            "admin" => Ok(Self::Admin),
            "member" => Ok(Self::Member),
            _ => Err(InvalidRole),
        }
    }

    /// Whether this role adds, changes and removes members: the owner and admins.
    pub fn manages_members(&self) -> bool {
        matches!(self, Self::Owner | Self::Admin)
    }
}

/// Why a change to a membership is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MemberChangeRefusal {
    /// The acting user is neither the owner nor an admin (and is not leaving).
    #[error("only the owner and admins manage members")]
    NotAManager,
    /// The change would remove or demote the owner.
    #[error("the owner can be neither removed nor demoted")]
    OwnerStays,
}

/// Whether `acting` (the acting member's role; `None` for the operator's command line)
/// may change or remove a member whose role is `target`. Anyone but the owner may remove
/// themselves (`leaving`). The owner is never changed, so an account always keeps a
/// member who manages members: that is what "the last admin cannot leave the account
/// without one" comes to while the owner stays.
///
/// The acting role is checked first: a plain member is refused for managing members
/// whoever the target is, the owner included, before the owner rule is considered.
///
/// # Errors
/// [`MemberChangeRefusal`] naming the rule.
pub fn check_member_change(
    acting: Option<Role>,
    target: Role,
    leaving: bool,
) -> Result<(), MemberChangeRefusal> {
    if acting.is_some_and(|role| !role.manages_members()) && !leaving {
        return Err(MemberChangeRefusal::NotAManager);
    }
    if target == Role::Owner {
        return Err(MemberChangeRefusal::OwnerStays);
    }
    Ok(())
}

/// An account as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Its id.
    pub id: AccountId,
    /// Its name.
    pub name: AccountName,
    /// Default for click tracking of templates that do not set their own.
    pub click_tracking: bool,
    /// Default for open tracking of templates that do not set their own.
    pub open_tracking: bool,
    /// Its mail servers never send a password without TLS.
    pub refuse_clear_text_auth: bool,
    /// The webhook configuration, once one was set.
    pub webhooks: Option<WebhookConfig>,
    /// The branding of its public pages.
    pub branding: Branding,
    /// When it was created.
    pub created_at: Timestamp,
}

/// A partial update of an account: `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountPatch {
    /// A new name.
    pub name: Option<AccountName>,
    /// A new click-tracking default.
    pub click_tracking: Option<bool>,
    /// A new open-tracking default.
    pub open_tracking: Option<bool>,
    /// Changes to the branding.
    pub branding: Option<BrandingPatch>,
    /// Whether its mail servers may send a password without TLS (`Some(true)` refuses).
    pub refuse_clear_text_auth: Option<bool>,
}

impl AccountPatch {
    /// True when the patch changes nothing (the API refuses that with 400).
    pub fn is_empty(&self) -> bool {
        self.name.is_none()
            && self.click_tracking.is_none()
            && self.open_tracking.is_none()
            && self.branding.is_none()
            && self.refuse_clear_text_auth.is_none()
    }
}

/// A user's membership of an account, as the members list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The member's user id.
    pub user_id: UserId,
    /// The member's email.
    pub email: String,
    /// The member's role.
    pub role: Role,
    /// When the membership began.
    pub created_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_managers_change_members_and_the_owner_stays() {
        use MemberChangeRefusal::{NotAManager, OwnerStays};
        assert_eq!(
            check_member_change(Some(Role::Owner), Role::Admin, false),
            Ok(())
        );
        assert_eq!(
            check_member_change(Some(Role::Admin), Role::Admin, false),
            Ok(())
        );
        assert_eq!(check_member_change(None, Role::Member, false), Ok(()));
        assert_eq!(
            check_member_change(Some(Role::Member), Role::Member, false),
            Err(NotAManager)
        );
        assert_eq!(
            check_member_change(Some(Role::Member), Role::Member, true),
            Ok(())
        );
        assert_eq!(
            check_member_change(Some(Role::Admin), Role::Owner, false),
            Err(OwnerStays)
        );
        assert_eq!(
            check_member_change(Some(Role::Owner), Role::Owner, true),
            Err(OwnerStays)
        );
        assert_eq!(
            check_member_change(None, Role::Owner, false),
            Err(OwnerStays)
        );
        // A plain member is no manager, whoever the target: the role comes first.
        assert_eq!(
            check_member_change(Some(Role::Member), Role::Owner, false),
            Err(NotAManager)
        );
        assert_eq!(Role::parse_assignable("owner"), Err(InvalidRole));
        assert_eq!(Role::from_stored("admin"), Role::Admin);
    }

    #[test]
    fn names_are_trimmed_and_bounded() {
        assert_eq!(
            AccountName::parse("  Acme ").expect("valid").as_str(),
            "Acme"
        );
        assert_eq!(AccountName::parse("   "), Err(InvalidName::Empty));
        assert_eq!(
            AccountName::parse(&"x".repeat(201)),
            Err(InvalidName::TooLong(200))
        );
    }
}
