//! Accounts and their members.

use mailroom_domain::{AccountId, Timestamp, UserId};
use serde::{Deserialize, Serialize};

use super::Webhooks;

/// An account (a workspace), with its webhook configuration (secrets masked).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Account {
    /// The account's id.
    #[serde(rename = "_id")]
    pub id: AccountId,
    /// Its name.
    pub name: String,
    /// Whether links in its messages are tracked.
    pub click_tracking: bool,
    /// Whether opens of its messages are tracked.
    pub open_tracking: bool,
    /// When it was created.
    pub create_date: Timestamp,
    /// Its webhook configuration, `None` until one is set.
    #[serde(default)]
    pub webhooks: Option<Webhooks>,
    /// The branding of its public pages (the unsubscribe page).
    #[serde(default)]
    pub branding: Branding,
    /// Its mail servers never send a password without TLS.
    #[serde(default)]
    pub refuse_clear_text_auth: bool,
}

/// The branding of an account's public pages; unset parts are `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Branding {
    /// The name the page shows as the sender (the account's name when `None`).
    pub display_name: Option<String>,
    /// The logo's https URL.
    pub logo_url: Option<String>,
    /// The accent colour, `#rrggbb`.
    pub accent_color: Option<String>,
    /// The text colour the server puts on the accent colour (`#ffffff` or `#000000`).
    pub accent_text_color: Option<String>,
}

/// `branding` in [`AccountUpdate`]: `None` keeps a part, `Some(None)` clears it,
/// `Some(Some(value))` sets it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrandingUpdate {
    /// The display name (1 to 100 characters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<Option<String>>,
    /// An https logo URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logo_url: Option<Option<String>>,
    /// `#rrggbb`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accent_color: Option<Option<String>>,
}

/// The body of `create_account`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewAccount {
    /// Its name (required).
    pub name: String,
    /// Track link clicks (the server's default when `None`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub click_tracking: Option<bool>,
    /// Track opens (the server's default when `None`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_tracking: Option<bool>,
}

/// The body of `update_account`: the fields to change (at least one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountUpdate {
    /// A new name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Track link clicks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub click_tracking: Option<bool>,
    /// Track opens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_tracking: Option<bool>,
    /// Changes to the branding of the public pages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branding: Option<BrandingUpdate>,
    /// Refuse (`true`) or allow sending a mail server's password without TLS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refuse_clear_text_auth: Option<bool>,
}

/// A member of an account.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    /// The user's id.
    #[serde(rename = "_id")]
    pub id: UserId,
    /// The user's email address.
    pub email: String,
    /// `owner`, `admin` or `member`.
    pub role: String,
    /// When the membership began.
    pub create_date: Timestamp,
}

/// The role given to a member by `add_member` or `change_member_role` (the owner is
/// fixed: there is no role to make someone owner).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MemberRole {
    /// Manages members, mail servers, webhooks, everything.
    Admin,
    /// Works in the account; cannot manage members.
    Member,
}

/// The body of `add_member`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewMember {
    /// The person's email; the user is created if unknown.
    pub email: String,
    /// Their role.
    pub role: MemberRole,
}

/// The body of `change_member_role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MemberRoleChange {
    /// The new role.
    pub role: MemberRole,
}
