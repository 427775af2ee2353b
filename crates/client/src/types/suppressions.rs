//! The suppression list (addresses an account must not mail, whatever became of their
//! contacts) and the export of everything kept about one person.

use mailroom_domain::Timestamp;
use serde::{Deserialize, Serialize};

use super::ImportError;

/// One entry of the list: an address and one reason it must not be mailed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Suppression {
    /// The address as written; `None` once the person was erased.
    #[serde(default)]
    pub email: Option<String>,
    /// The keyed hash of the lower-cased address, as hex: what the entry is kept by.
    pub address_hash: String,
    /// `hard_bounce`, `complaint`, `unsubscribe` or `manual`.
    pub reason: String,
    /// What listed it: `smtp_reply`, `feedback_report`, `unsubscribe_link`,
    /// `contact_deleted`, `api`, `import` or `console`.
    pub source: String,
    /// What the source said, when anything.
    #[serde(default)]
    pub detail: Option<String>,
    /// When it was listed.
    pub create_date: Timestamp,
}

/// Filters of `list_suppressions`, `count_suppressions` and `remove_suppressions`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SuppressionFilter {
    /// Only the entries of this address (case-insensitive); required by the removal.
    pub email: Option<String>,
    /// Only the entries of this reason.
    pub reason: Option<String>,
}

impl SuppressionFilter {
    /// The entries of one address, for every reason.
    pub fn email(email: impl Into<String>) -> Self {
        Self {
            email: Some(email.into()),
            reason: None,
        }
    }

    pub(crate) fn query(&self) -> Vec<(&'static str, String)> {
        [("email", &self.email), ("reason", &self.reason)]
            .into_iter()
            .filter_map(|(name, value)| value.as_ref().map(|value| (name, value.clone())))
            .collect()
    }
}

/// The body of `add_suppression`: an address listed by hand.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NewSuppression {
    /// The address.
    pub email: String,
    /// A note kept with the entry (at most 1,000 characters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The answer of `remove_suppressions`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RemovedSuppressions {
    /// The entries removed.
    pub removed: Vec<Suppression>,
}

/// The answer of `import_suppressions`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SuppressionImportReport {
    /// Addresses newly listed by hand.
    pub added: u64,
    /// Rows whose address was listed by hand already.
    pub already_listed: u64,
    /// Rows not imported.
    pub rejected: u64,
    /// Why rows were rejected (the first ones).
    pub errors: Vec<ImportError>,
}

/// The answer of `export_contact`: everything the account keeps about one person.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContactExport {
    /// When the export was made.
    pub export_date: Timestamp,
    /// The contact with its attributes.
    pub contact: super::Contact,
    /// Its address's entries on the suppression list.
    pub suppressions: Vec<Suppression>,
    /// Every event of the contact, newest first.
    pub events: Vec<super::ContactEvent>,
    /// Every message to the contact, newest first.
    pub messages: Vec<super::Message>,
}
