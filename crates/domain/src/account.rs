//! Accounts (workspaces), their names and memberships.

use serde::Serialize;

use crate::{webhook::WebhookConfig, AccountId, Timestamp, UserId};

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

/// A user's part in an account. The creator is its `owner`; every member may use every
/// account path (finer roles are not part of the v2 API).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Created the account.
    Owner,
    /// Added later.
    Member,
}

impl Role {
    /// The stored text form.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Owner => "owner",
            Self::Member => "member",
        }
    }

    /// Reads the stored text form; unknown text reads as `member`, the lesser role.
    pub fn from_stored(text: &str) -> Self {
        if text == "owner" {
            Self::Owner
        } else {
            Self::Member
        }
    }
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
    /// The webhook configuration, once one was set.
    pub webhooks: Option<WebhookConfig>,
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
}

impl AccountPatch {
    /// True when the patch changes nothing (the API refuses that with 400).
    pub fn is_empty(&self) -> bool {
        self.name.is_none() && self.click_tracking.is_none() && self.open_tracking.is_none()
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
