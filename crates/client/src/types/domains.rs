//! Sending domains: the domains an account sends from, their DKIM keys and the DNS
//! records their owner publishes.

use mailroom_domain::{SendingDomainId, Timestamp};
use serde::{Deserialize, Serialize};

/// A sending domain and the DNS records to publish for it (the private keys never leave
/// the server).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendingDomain {
    /// The domain's id.
    #[serde(rename = "_id")]
    pub id: SendingDomainId,
    /// The domain, lower-cased, e.g. `mail.example.com`.
    pub name: String,
    /// `pending` (never checked), `verified` (a DKIM key's record was found at the latest
    /// check) or `failed`.
    pub status: String,
    /// The DKIM keys.
    pub dkim: Dkim,
    /// What to publish, each with its status at the latest check.
    pub records: Vec<DnsRecord>,
    /// When it was created.
    pub create_date: Timestamp,
    /// The latest check that found the domain verified; `None` before one.
    #[serde(default)]
    pub verified_at: Option<Timestamp>,
    /// The latest check; `None` before one.
    #[serde(default)]
    pub checked_at: Option<Timestamp>,
}

/// A domain's DKIM keys.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dkim {
    /// The selector mail is signed with: the newest key whose record was found; `None`
    /// while none was.
    #[serde(default)]
    pub signing_selector: Option<String>,
    /// Every key, oldest first.
    pub selectors: Vec<DkimSelector>,
}

/// One DKIM key of a domain.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DkimSelector {
    /// The selector (the `s=` of a signature, and the first label of its record).
    pub selector: String,
    /// The public key, base64 DER (DKIM's `p=`).
    pub public_key: String,
    /// `pending`, `verified` or `failed`.
    pub status: String,
    /// When it was made.
    pub create_date: Timestamp,
}

/// A DNS record the domain's owner publishes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DnsRecord {
    /// `dkim`, `spf`, `dmarc` or `returnPath`.
    pub purpose: String,
    /// `TXT` or `MX`.
    #[serde(rename = "type")]
    pub record_type: String,
    /// The owner name.
    pub name: String,
    /// The value (for `MX`, the exchange).
    pub value: String,
    /// `pending`, `verified` or `failed`. SPF and DMARC are hints: the domain's status
    /// does not depend on them.
    pub status: String,
}

/// The body of `create_domain`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NewDomain {
    /// The domain, e.g. `mail.example.com` (at most 200 characters; the server
    /// lower-cases it).
    pub name: String,
}

impl NewDomain {
    /// A domain named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into() }
    }
}
