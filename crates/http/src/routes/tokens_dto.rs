//! JSON shapes of `/v2/users/me/tokens`, and their conversion from domain values. Field
//! names follow the API specification (camelCase, `_id`).

use mailroom_app::{ports::TokenRecord, tokens::IssuedToken};
use mailroom_domain::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Body of `POST /v2/users/me/tokens`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateTokenBody {
    /// Where the token is used.
    pub name: Option<String>,
    /// 30, 60 or 90; omitted or null for a token that never expires.
    pub expires_in_days: Option<i64>,
    /// `full` (the default: every route its user may call) or `sending` (recording
    /// events, sending messages, reading a message, looking a contact up by email).
    #[schema(example = "sending")]
    pub scope: Option<String>,
    /// Pins the token to some of the caller's accounts; omitted or null for all of them.
    pub account_ids: Option<Vec<String>>,
}

/// A personal access token. `token` appears only in the creation response.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// Label.
    pub name: String,
    /// Creation time.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
    /// Expiry; null for a token that never expires.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<Timestamp>,
    /// Last use (updated at most once a minute).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_used_at: Option<Timestamp>,
    /// `full` or `sending`.
    pub scope: &'static str,
    /// The accounts the token is pinned to; null when it reaches every account of its
    /// user.
    pub account_ids: Option<Vec<String>>,
    /// The raw token, shown once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

impl From<TokenRecord> for TokenDto {
    fn from(record: TokenRecord) -> Self {
        Self {
            id: record.id.to_string(),
            name: record.name,
            create_date: record.created_at,
            expires_at: record.expires_at,
            last_used_at: record.last_used_at,
            scope: record.scope.as_str(),
            account_ids: record
                .account_ids
                .map(|ids| ids.iter().map(ToString::to_string).collect()),
            token: None,
        }
    }
}

impl From<IssuedToken> for TokenDto {
    fn from(issued: IssuedToken) -> Self {
        Self {
            token: Some(issued.raw.expose().to_owned()),
            ..Self::from(issued.record)
        }
    }
}
