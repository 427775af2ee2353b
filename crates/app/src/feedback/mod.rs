//! Feedback intake: complaints (ARF, RFC 5965) and late bounces (DSN, RFC 3464) posted
//! raw to `POST …/feedback` (docs/design.md#8-delivery).
//!
//! [`parse`] takes the MIME message apart with mail-parser and hands the fields to the
//! domain's rules ([`mailroom_domain::feedback`]); [`record_feedback`] matches the report
//! to a message or contact and records it in one transaction. Parsing is pure and needs
//! no port: like the template renderer, it is a library call, not a conversation with
//! the outside world (see docs/ARCHITECTURE.md).

pub mod parse;
mod record_feedback;

pub use parse::{parse_feedback, NotAReport};
pub use record_feedback::{record_feedback, record_report, FeedbackOutcome, FeedbackType};
