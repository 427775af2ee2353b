//! Feedback sources: email providers' bounce and complaint webhooks (Amazon SES through
//! SNS, Postmark, Mailgun, SendGrid), each bound to one account
//! (docs/api-decisions.md, "Provider events"; set-up in docs/operations.md).
//!
//! [`manage`] creates, lists and deletes sources; [`receive`] authenticates a provider's
//! request for a source and records each event through
//! [`crate::feedback::record_report`], the rules `POST …/feedback` applies. The
//! per-provider modules are pure: they check signatures and map payloads onto
//! [`mailroom_domain::feedback::FeedbackReport`]s.

pub mod mailgun;
mod manage;
pub mod postmark;
mod receive;
pub mod sendgrid;
pub mod ses;
mod sns;

use mailroom_domain::{AccountId, FeedbackSourceId};

pub use manage::{
    create_feedback_source, delete_feedback_source, get_feedback_source, list_feedback_sources,
    CreatedFeedbackSource, FeedbackSource, FeedbackSourceInput,
};
pub use receive::{receive_provider_events, ProviderRequest, ReceiveOutcome, READ_HEADERS};
pub use sns::{CertificateCache, SnsSettings, MAX_CACHED_CERTIFICATES};

use crate::ports::SecretSlot;

/// The most feedback sources one account may have.
pub const MAX_SOURCES: usize = 20;

/// Where a Mailgun source's signing key is sealed.
pub(crate) fn signing_key_slot(account: AccountId, id: FeedbackSourceId) -> SecretSlot {
    SecretSlot {
        table: "feedback_sources",
        column: "signing_key",
        row: format!("{account}/{id}"),
    }
}

/// The path a provider posts a source's events to, below the public URL.
pub fn events_path(account: AccountId, id: FeedbackSourceId) -> String {
    format!("/v2/feedback-sources/{account}/{id}/events")
}
