//! The state changes of a claimed message other than an SMTP outcome: a skip, a
//! permanent failure before any session, and the quarantine of a message whose claims
//! keep ending without an outcome.
//!
//! A claim moves a message to `sending` and counts it (`claims_without_outcome` in the
//! store); every state write sets that count back to zero. A message claimed again and
//! again without an outcome is one whose worker died or lost the lease while holding it,
//! for instance a template that exhausts the render process: it must not be claimed
//! forever, ahead of everyone else's mail.

use crate::{
    message::{Message, MessageStatus, SkipReason},
    Timestamp,
};

/// How many claims in a row may end without an outcome; the next claim quarantines the
/// message.
pub const QUARANTINE_AFTER_CLAIMS: u32 = 3;

/// The start of `lastReply` of a quarantined message.
pub const QUARANTINE_REPLY_PREFIX: &str = "quarantined:";

impl Message {
    /// Whether a claim that is the `claims_without_outcome`-th since the message's last
    /// outcome must quarantine it instead of sending it.
    pub fn must_quarantine(claims_without_outcome: u32) -> bool {
        claims_without_outcome > QUARANTINE_AFTER_CLAIMS
    }

    /// Settles the message as `skipped` for `reason`, without a session.
    pub fn skip(&mut self, reason: SkipReason, now: Timestamp) {
        self.status = MessageStatus::Skipped;
        self.skip_reason = Some(reason);
        self.next_attempt_at = None;
        self.updated_at = now;
    }

    /// Settles the message as `failed` for `reason` (shown as its `lastReply`), without a
    /// session: a permanent local refusal such as a template that does not render.
    pub fn fail(&mut self, reason: String, now: Timestamp) {
        self.status = MessageStatus::Failed;
        self.next_attempt_at = None;
        self.last_reply = Some(reason);
        self.updated_at = now;
    }

    /// Settles the message as `failed` because its last [`QUARANTINE_AFTER_CLAIMS`]
    /// claims ended without an outcome; `lastReply` starts with
    /// [`QUARANTINE_REPLY_PREFIX`] and says why.
    pub fn quarantine(&mut self, now: Timestamp) {
        self.fail(
            format!(
                "{QUARANTINE_REPLY_PREFIX} {QUARANTINE_AFTER_CLAIMS} claims in a row ended \
                 without an outcome (the worker stopped or lost the lease while rendering or \
                 sending it)"
            ),
            now,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_claim_after_three_without_an_outcome_quarantines() {
        assert!(!Message::must_quarantine(1));
        assert!(!Message::must_quarantine(QUARANTINE_AFTER_CLAIMS));
        assert!(Message::must_quarantine(QUARANTINE_AFTER_CLAIMS + 1));
    }
}
