//! JSON shapes of the suppression list.

use mailroom_app::suppressions::SuppressionImportSummary;
use mailroom_domain::{suppression::SuppressionEntry, Timestamp};

use crate::routes::contacts_import::ImportErrorDto;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One entry of the list: an address and one reason it must not be mailed.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuppressionDto {
    /// The address as written; `null` once the person was erased.
    pub email: Option<String>,
    /// HMAC-SHA256 of the lower-cased address under the account's key, as hex: what the
    /// entry is kept by.
    pub address_hash: String,
    /// `hard_bounce`, `complaint`, `unsubscribe` or `manual`.
    pub reason: String,
    /// What listed it: `smtp_reply`, `feedback_report`, `unsubscribe_link`,
    /// `contact_deleted`, `api`, `import` or `console`.
    pub source: String,
    /// What the source said (an SMTP reply, a report's diagnostic, the account's note),
    /// omitted when nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// When it was listed.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
}

impl From<SuppressionEntry> for SuppressionDto {
    fn from(entry: SuppressionEntry) -> Self {
        Self {
            email: entry.email,
            address_hash: entry.address_hash.to_string(),
            reason: entry.reason.as_str().to_owned(),
            source: entry.source.as_str().to_owned(),
            detail: entry.detail,
            create_date: entry.created_at,
        }
    }
}

/// Body of `POST …/suppressions`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SuppressionBody {
    /// The address to list by hand.
    pub email: String,
    /// A note kept with the entry (at most 1,000 characters).
    #[serde(default)]
    pub detail: Option<String>,
}

/// Query parameters of the list, its count and the removal.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
pub struct SuppressionParams {
    /// Only the entries of this address (case-insensitive); required by the removal.
    pub email: Option<String>,
    /// Only entries of this reason.
    pub reason: Option<String>,
}

/// Answer of `DELETE …/suppressions`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemovedSuppressionsDto {
    /// The entries removed.
    pub removed: Vec<SuppressionDto>,
}

/// The answer of `POST …/suppressions/import`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuppressionImportReportDto {
    /// Addresses newly listed by hand.
    pub added: u64,
    /// Rows whose address was listed by hand already (also by an earlier row of the file).
    pub already_listed: u64,
    /// Rows not imported.
    pub rejected: u64,
    /// Why rows were rejected, in file order; at most 1,000 entries (`rejected` stays
    /// exact).
    pub errors: Vec<ImportErrorDto>,
}

impl From<SuppressionImportSummary> for SuppressionImportReportDto {
    fn from(summary: SuppressionImportSummary) -> Self {
        Self {
            added: summary.added,
            already_listed: summary.already_listed,
            rejected: summary.rejected,
            errors: summary
                .errors
                .into_iter()
                .map(ImportErrorDto::from)
                .collect(),
        }
    }
}
