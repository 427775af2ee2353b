//! Personal access tokens.

use mailroom_domain::{AccountId, Timestamp, TokenId};
use serde::{Deserialize, Serialize};

use super::Secret;

/// A personal access token. `token` (the secret itself) is present only in the answer to
/// `create_token`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Token {
    /// The token's id.
    #[serde(rename = "_id")]
    pub id: TokenId,
    /// Its name.
    pub name: String,
    /// When it was made.
    pub create_date: Timestamp,
    /// `full` or `sending`.
    pub scope: String,
    /// The accounts it is pinned to; `None` for all of its user's accounts.
    #[serde(default)]
    pub account_ids: Option<Vec<AccountId>>,
    /// When it stops working, if ever.
    #[serde(default)]
    pub expires_at: Option<Timestamp>,
    /// Its last use.
    #[serde(default)]
    pub last_used_at: Option<Timestamp>,
    /// The secret (`mailroom_pat_…`), only when just created.
    #[serde(default)]
    pub token: Option<Secret>,
}

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenScope {
    /// Everything its user may do.
    Full,
    /// Only what a product backend needs: record events, send messages, read a message,
    /// look a contact up by email.
    Sending,
}

/// The body of `create_token`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewToken {
    /// Its name (required).
    pub name: String,
    /// Days until it expires; never when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in_days: Option<i64>,
    /// Its scope (`full` when `None`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<TokenScope>,
    /// Pins it to these accounts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_ids: Option<Vec<AccountId>>,
}
