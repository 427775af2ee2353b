//! The suppression list: addresses an account must not mail, whatever becomes of the
//! contact that had them. An entry names the address by a keyed hash of its normalised
//! form ([`crate::email::normalize_email`]), so the entry can outlive an erasure of the
//! person; the address in clear is kept beside it only until then.

use std::fmt;

use crate::{message::Suppression, Timestamp};

/// Why an address is on the list. An address may be listed for several reasons at once,
/// one entry each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SuppressionReason {
    /// A permanent delivery failure (an SMTP 5xx at the end of the message, or a late
    /// delivery report).
    HardBounce,
    /// A spam complaint (a feedback report).
    Complaint,
    /// The person unsubscribed from everything.
    Unsubscribe,
    /// Listed by the account itself (the API, an import, the console).
    Manual,
}

impl SuppressionReason {
    /// Every reason.
    pub const ALL: [Self; 4] = [
        Self::HardBounce,
        Self::Complaint,
        Self::Unsubscribe,
        Self::Manual,
    ];

    /// The wire and storage name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HardBounce => "hard_bounce",
            Self::Complaint => "complaint",
            Self::Unsubscribe => "unsubscribe",
            Self::Manual => "manual",
        }
    }

    /// The reason named `text`, if any.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|reason| reason.as_str() == text)
    }

    /// Adds what this reason stops to `flags`.
    pub fn apply(self, flags: &mut Suppression) {
        match self {
            Self::HardBounce => flags.hard_bounced = true,
            Self::Complaint => flags.complained = true,
            Self::Unsubscribe => flags.unsubscribed = true,
            Self::Manual => flags.listed = true,
        }
    }
}

impl fmt::Display for SuppressionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What put the address on the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SuppressionSource {
    /// The receiving server's reply during delivery.
    SmtpReply,
    /// A delivery report or complaint received later (`…/feedback`, a provider's event).
    FeedbackReport,
    /// The unsubscribe page or one-click unsubscribe.
    UnsubscribeLink,
    /// The contact was deleted while it carried a mark that had no entry yet.
    ContactDeleted,
    /// `POST …/suppressions`.
    Api,
    /// `POST …/suppressions/import`.
    Import,
    /// The console.
    Console,
}

impl SuppressionSource {
    /// Every source.
    pub const ALL: [Self; 7] = [
        Self::SmtpReply,
        Self::FeedbackReport,
        Self::UnsubscribeLink,
        Self::ContactDeleted,
        Self::Api,
        Self::Import,
        Self::Console,
    ];

    /// The wire and storage name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SmtpReply => "smtp_reply",
            Self::FeedbackReport => "feedback_report",
            Self::UnsubscribeLink => "unsubscribe_link",
            Self::ContactDeleted => "contact_deleted",
            Self::Api => "api",
            Self::Import => "import",
            Self::Console => "console",
        }
    }

    /// The source named `text`, if any.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|source| source.as_str() == text)
    }
}

/// The keyed hash that names an address on an account's list: HMAC-SHA256 of the
/// normalised address under the account's own key.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AddressHash(pub [u8; 32]);

impl fmt::Debug for AddressHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AddressHash({self})")
    }
}

impl fmt::Display for AddressHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

/// Longest `detail` kept with an entry (an SMTP reply, a report's diagnostic), in
/// characters; longer text is cut.
pub const MAX_SUPPRESSION_DETAIL: usize = 1000;

/// One entry of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuppressionEntry {
    /// The address's hash.
    pub address_hash: AddressHash,
    /// Why.
    pub reason: SuppressionReason,
    /// What listed it.
    pub source: SuppressionSource,
    /// The address as written, until the person is erased.
    pub email: Option<String>,
    /// What the source said (the SMTP reply, the report's diagnostic), cut to
    /// [`MAX_SUPPRESSION_DETAIL`] characters.
    pub detail: Option<String>,
    /// When it was listed.
    pub created_at: Timestamp,
}

/// `text` cut to [`MAX_SUPPRESSION_DETAIL`] characters.
pub fn suppression_detail(text: &str) -> String {
    text.chars().take(MAX_SUPPRESSION_DETAIL).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for reason in SuppressionReason::ALL {
            assert_eq!(SuppressionReason::parse(reason.as_str()), Some(reason));
        }
        for source in SuppressionSource::ALL {
            assert_eq!(SuppressionSource::parse(source.as_str()), Some(source));
        }
        assert_eq!(SuppressionReason::parse("bounce"), None);
    }

    #[test]
    fn each_reason_stops_what_its_mark_stops() {
        let mut flags = Suppression::default();
        SuppressionReason::Unsubscribe.apply(&mut flags);
        assert!(flags.unsubscribed && !flags.hard_bounced && !flags.listed);
        SuppressionReason::Manual.apply(&mut flags);
        SuppressionReason::HardBounce.apply(&mut flags);
        SuppressionReason::Complaint.apply(&mut flags);
        assert!(flags.listed && flags.hard_bounced && flags.complained);
    }

    #[test]
    fn a_detail_is_cut_by_characters_not_bytes() {
        let long = "é".repeat(MAX_SUPPRESSION_DETAIL + 5);
        let cut = suppression_detail(&long);
        assert_eq!(cut.chars().count(), MAX_SUPPRESSION_DETAIL);
        assert_eq!(
            AddressHash([0xab; 32]).to_string(),
            "ab".repeat(32),
            "the hash reads as lower-case hex"
        );
    }
}
