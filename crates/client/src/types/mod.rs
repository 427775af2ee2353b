//! The request and response bodies of the API as plain serde structs, one module per
//! resource. Field names follow the API's camelCase; ids and times are the service's own
//! types ([`mailroom_domain::AccountId`], [`mailroom_domain::Timestamp`], …), so a value read
//! from one call can be passed to the next without parsing.
//!
//! Response types ignore fields they do not know, so a newer server does not break an
//! older client. Request types leave out every `None`, because the server refuses unknown
//! fields and treats a `null` as "clear this field" on a PATCH ([`Patch`]).

pub mod accounts;
pub mod announcements;
pub mod automations;
pub mod contacts;
pub mod domains;
pub mod feedback_sources;
pub mod forms;
pub mod mail_servers;
pub mod messages;
pub mod segments;
pub mod suppressions;
pub mod system;
pub mod templates;
pub mod tokens;
pub mod topics;
pub mod webhooks;

pub use accounts::*;
pub use announcements::*;
pub use automations::*;
pub use contacts::*;
pub use domains::*;
pub use feedback_sources::*;
pub use forms::*;
pub use mail_servers::*;
pub use messages::*;
pub use segments::*;
pub use suppressions::*;
pub use system::*;
pub use templates::*;
pub use tokens::*;
pub use topics::*;
pub use webhooks::*;

use serde::{Serialize, Serializer};

/// One field of a partial update (PATCH): left as it is, cleared (`null`), or set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Patch<T> {
    /// Not sent: the server keeps the current value.
    #[default]
    Keep,
    /// Sent as `null`: the server clears the field (refused with a 400 for fields that
    /// may not be empty).
    Clear,
    /// Sent with this value.
    Set(T),
}

impl<T> Patch<T> {
    /// True for [`Patch::Keep`], which is left out of the body.
    pub fn is_keep(&self) -> bool {
        matches!(self, Self::Keep)
    }
}

impl<T> From<T> for Patch<T> {
    fn from(value: T) -> Self {
        Self::Set(value)
    }
}

impl<T: Serialize> Serialize for Patch<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            // `Keep` is skipped by `skip_serializing_if`; written alone it reads as null.
            Self::Keep | Self::Clear => serializer.serialize_none(),
            Self::Set(value) => serializer.serialize_some(value),
        }
    }
}

/// A secret value (a token, a password, a signing secret) that stays out of `Debug` output
/// and logs; [`Secret::expose`] reads it.
#[derive(Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// The value itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

/// The answer of every `/count` route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
pub(crate) struct Count {
    pub(crate) count: u64,
}
