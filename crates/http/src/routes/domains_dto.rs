//! JSON shapes of sending domains, and their conversion from domain values.

use mailroom_app::domains::DomainView;
use mailroom_domain::{patch::Field, Timestamp};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Body of `POST …/domains`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DomainBody {
    /// The domain, such as `example.com` (lower-cased; at most 200 characters).
    #[serde(default)]
    #[schema(value_type = String)]
    pub name: Field<String>,
}

/// A sending domain and the DNS records its owner publishes.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DomainDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// The domain.
    pub name: String,
    /// `pending` (never checked), `verified` (a DKIM key's record was found at the latest
    /// check) or `failed`.
    pub status: &'static str,
    /// The DKIM keys.
    pub dkim: DkimDto,
    /// What to publish, each with its status at the latest check.
    pub records: Vec<DnsRecordDto>,
    /// Creation time.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
    /// The latest check that found the domain verified; `null` before one.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub verified_at: Option<Timestamp>,
    /// The latest check; `null` before one.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub checked_at: Option<Timestamp>,
}

/// A domain's DKIM keys.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DkimDto {
    /// The selector mail is signed with: the newest key whose record was found; `null`
    /// while none was.
    pub signing_selector: Option<String>,
    /// Every key, oldest first.
    pub selectors: Vec<DkimSelectorDto>,
}

/// One DKIM key (the private key never leaves storage).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DkimSelectorDto {
    /// The selector.
    pub selector: String,
    /// The public key (base64 DER, DKIM's `p=`).
    pub public_key: String,
    /// `pending`, `verified` or `failed`.
    pub status: &'static str,
    /// Creation time.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
}

/// A DNS record to publish.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DnsRecordDto {
    /// `dkim`, `spf`, `dmarc` or `returnPath`.
    pub purpose: &'static str,
    /// `TXT` or `MX`.
    #[serde(rename = "type")]
    pub record_type: &'static str,
    /// The owner name.
    pub name: String,
    /// The value (for `MX`, the exchange; any preference).
    pub value: String,
    /// `pending`, `verified` or `failed`. SPF and DMARC are hints: the domain's status
    /// does not depend on them.
    pub status: &'static str,
}

impl DomainDto {
    /// The API shape of `view`.
    pub fn of(view: DomainView) -> Self {
        let domain = view.domain;
        Self {
            id: domain.id.to_string(),
            name: domain.name.as_str().to_owned(),
            status: domain.status.as_str(),
            dkim: DkimDto {
                signing_selector: domain.signing_selector().map(|key| key.selector.clone()),
                selectors: domain
                    .selectors
                    .iter()
                    .map(|key| DkimSelectorDto {
                        selector: key.selector.clone(),
                        public_key: key.public_key.clone(),
                        status: key.status.as_str(),
                        create_date: key.created_at,
                    })
                    .collect(),
            },
            records: view
                .records
                .into_iter()
                .map(|record| DnsRecordDto {
                    purpose: record.purpose.as_str(),
                    record_type: record.record_type.as_str(),
                    name: record.name,
                    value: record.value,
                    status: record.status.as_str(),
                })
                .collect(),
            create_date: domain.created_at,
            verified_at: domain.verified_at,
            checked_at: domain.checked_at,
        }
    }
}
