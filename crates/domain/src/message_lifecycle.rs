//! The state changes of a message in delivery (docs/ARCHITECTURE.md, "One walk"): the
//! claim ([`Message::claim`]), the outcome of its SMTP session ([`Message::settle`]),
//! and what ends or delays it without a session: a skip, a permanent failure, waiting
//! for an unhealthy mail server, and the quarantine of a message whose claims keep
//! ending without an outcome.
//!
//! The rules:
//! - a claim takes a message that is `queued` or `sending` ([`MessageStatus::CLAIMABLE`];
//!   a `sending` one only once its holder's lease ran out, which the store checks since
//!   it keeps the lease) and due, and moves it to `sending`; it spends no attempt;
//! - a claim holds the message for a lease ([`lease_end`]), which the holder renews every
//!   [`LEASE_RENEWALS`]th of it while it works, so a dead worker's messages are free
//!   about one lease later;
//! - the store counts each claim (`claims_without_outcome`) and every state write sets
//!   that count back to zero. A message claimed again and again without an outcome is
//!   one whose worker died or lost the lease while holding it, for instance a template
//!   that exhausts the render process: it must not be claimed forever, ahead of everyone
//!   else's mail, so it is quarantined ([`Message::must_quarantine`]);
//! - settling accepts only a `sending` message; each session spends one attempt, except
//!   when the mail server refused Mailroom itself (then the server is at fault and the
//!   message waits for it); a transient refusal requeues it with a backoff until the
//!   attempts run out.

use std::fmt;

use time::Duration;

use crate::{
    message::{
        retry_delay, AttemptFault, Message, MessageStatus, ReplyClass, SkipReason, StatsCounter,
        RETRY_BASE,
    },
    Timestamp,
};

/// How many claims in a row may end without an outcome; the next claim quarantines the
/// message.
pub const QUARANTINE_AFTER_CLAIMS: u32 = 3;

/// The start of `lastReply` of a quarantined message.
pub const QUARANTINE_REPLY_PREFIX: &str = "quarantined:";

impl MessageStatus {
    /// The statuses a claim may take a message from: `queued`, and `sending` whose
    /// holder's lease ran out.
    pub const CLAIMABLE: [Self; 2] = [Self::Queued, Self::Sending];

    /// Whether a claim may take a message in this status (see [`Self::CLAIMABLE`]).
    pub fn is_claimable(self) -> bool {
        Self::CLAIMABLE.contains(&self)
    }
}

/// The holder of a lease renews it this many times per lease length.
pub const LEASE_RENEWALS: u32 = 3;

/// When a claim made at `now` with a lease of `lease` runs out (a lease too long to
/// represent is cut to a day).
pub fn lease_end(now: Timestamp, lease: std::time::Duration) -> Timestamp {
    now.plus(
        Duration::try_from(lease)
            .unwrap_or(Duration::DAY)
            .min(Duration::DAY),
    )
}

/// A state change the message's status does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifecycleError {
    /// A claim of a message that is neither queued nor sending.
    NotClaimable(MessageStatus),
    /// A claim of a message whose next attempt is not due yet (or that has none).
    NotDue,
    /// An outcome for a message that is not `sending`.
    NotSending(MessageStatus),
}

impl fmt::Display for LifecycleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotClaimable(status) => {
                write!(f, "a {} message cannot be claimed", status.as_str())
            }
            Self::NotDue => f.write_str("the message is not due"),
            Self::NotSending(status) => write!(
                f,
                "an outcome was given for a {} message, not a sending one",
                status.as_str()
            ),
        }
    }
}

impl std::error::Error for LifecycleError {}

/// How a message's SMTP session ended, as settling reads it.
#[derive(Debug, Clone, Copy)]
pub enum SessionEnd<'a> {
    /// The server answered the end of DATA with 2xx; `summary` becomes `lastReply` (the
    /// reply, with any refused copies).
    Accepted {
        /// The reply as `lastReply` shows it.
        summary: &'a str,
    },
    /// The server did not take the message.
    Refused(&'a AttemptFault),
}

/// What settling a message needs besides the outcome.
#[derive(Debug, Clone, Copy)]
pub struct SettleRules {
    /// Attempts a message gets before a transient refusal fails it.
    pub max_attempts: u32,
    /// Whether the session went through a saved mail server, whose health a refusal of
    /// Mailroom itself can mark (without one, such a refusal counts as transient).
    pub saved_server: bool,
    /// A draw from `[0, 1)` for the backoff's jitter.
    pub jitter: f64,
}

/// What settling decided besides the message's own fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settlement {
    /// The daily counter the outcome adds to, if any.
    pub counter: Option<StatsCounter>,
    /// The refusal of a hard bounce: the contact is flagged hard-bounced with it.
    pub hard_bounce: Option<String>,
    /// The mail server refused Mailroom itself (the fault, as text): the server is
    /// unhealthy and the message waits for it without spending an attempt. Its
    /// `next_attempt_at` is a first guess ([`RETRY_BASE`]) that the caller replaces with
    /// [`crate::message::server_fault_delay`] once it knows how long the server has been
    /// unhealthy.
    pub server_fault: Option<String>,
    /// The server took the message: it is healthy.
    pub server_worked: bool,
}

impl Message {
    /// Claims the message at `now`: it must be in a claimable status
    /// ([`MessageStatus::CLAIMABLE`]) and due; it becomes `sending`. No attempt is spent
    /// (settling spends it).
    ///
    /// # Errors
    /// [`LifecycleError::NotClaimable`] or [`LifecycleError::NotDue`]; the message is
    /// unchanged then.
    pub fn claim(&mut self, now: Timestamp) -> Result<(), LifecycleError> {
        if !self.status.is_claimable() {
            return Err(LifecycleError::NotClaimable(self.status));
        }
        if self.next_attempt_at.is_none_or(|due| due > now) {
            return Err(LifecycleError::NotDue);
        }
        self.status = MessageStatus::Sending;
        Ok(())
    }

    /// Records how the message's session ended at `now`: `sent`; `bounced` for a hard
    /// bounce; `failed` for a permanent refusal or a transient one on the last attempt;
    /// back to `queued` with [`retry_delay`] for a transient one; back to `queued`
    /// without spending the attempt when the mail server refused Mailroom itself.
    ///
    /// # Errors
    /// [`LifecycleError::NotSending`] when the message is not `sending`; it is unchanged.
    pub fn settle(
        &mut self,
        end: SessionEnd<'_>,
        now: Timestamp,
        rules: &SettleRules,
    ) -> Result<Settlement, LifecycleError> {
        if self.status != MessageStatus::Sending {
            return Err(LifecycleError::NotSending(self.status));
        }
        let mut settlement = Settlement::default();
        let attempts_before = self.attempts;
        self.attempts = self.attempts.saturating_add(1);
        self.updated_at = now;
        let fault = match end {
            SessionEnd::Accepted { summary } => {
                self.status = MessageStatus::Sent;
                self.next_attempt_at = None;
                self.sent_at = Some(now);
                self.last_reply = Some(summary.to_owned());
                settlement.counter = Some(StatsCounter::Sent);
                settlement.server_worked = true;
                return Ok(settlement);
            }
            SessionEnd::Refused(fault) => fault,
        };
        self.last_reply = Some(fault.to_string());
        match fault.classify() {
            // Not the message's fault: it waits for the server without spending an
            // attempt.
            ReplyClass::ServerFault if rules.saved_server => {
                self.attempts = attempts_before;
                self.status = MessageStatus::Queued;
                self.next_attempt_at = Some(now.plus(RETRY_BASE));
                settlement.server_fault = Some(fault.to_string());
            }
            ReplyClass::HardBounce => {
                self.status = MessageStatus::Bounced;
                self.next_attempt_at = None;
                settlement.counter = Some(StatsCounter::Bounced);
                settlement.hard_bounce = Some(fault.to_string());
            }
            ReplyClass::Transient | ReplyClass::ServerFault
                if self.attempts < rules.max_attempts =>
            {
                self.status = MessageStatus::Queued;
                self.next_attempt_at = Some(now.plus(retry_delay(self.attempts, rules.jitter)));
            }
            // A 2xx reported as a refusal cannot happen (the session sorts them); it is
            // treated like any other permanent failure rather than guessed at.
            ReplyClass::Transient
            | ReplyClass::ServerFault
            | ReplyClass::PermanentFailure
            | ReplyClass::Accepted => {
                self.status = MessageStatus::Failed;
                self.next_attempt_at = None;
                settlement.counter = Some(StatsCounter::Failed);
            }
        }
        Ok(settlement)
    }

    /// Puts a claimed message back to `queued` until `due`, without spending an attempt,
    /// because its mail server cannot be used (`reason` becomes `lastReply`): the
    /// server's fault, not the message's.
    pub fn wait_for_server(&mut self, reason: String, due: Timestamp, now: Timestamp) {
        self.status = MessageStatus::Queued;
        self.next_attempt_at = Some(due);
        self.last_reply = Some(reason);
        self.updated_at = now;
    }

    /// Puts a claimed message back to `queued`, due at `now`, without spending an attempt:
    /// the worker did not render it in this claim (the messages rendered before it took
    /// the bytes a claim may hold). Its `lastReply` stays.
    pub fn defer(&mut self, now: Timestamp) {
        self.status = MessageStatus::Queued;
        self.next_attempt_at = Some(now);
        self.updated_at = now;
    }

    /// Puts a claimed message back to `queued`, due at `due`, without spending an attempt:
    /// its announcement is paused (a message claimed before the pause held the rest, or
    /// one whose retry fell due during it). Its `lastReply` stays.
    pub fn wait_for_resume(&mut self, due: Timestamp, now: Timestamp) {
        self.status = MessageStatus::Queued;
        self.next_attempt_at = Some(due);
        self.updated_at = now;
    }

    /// Whether a claim that is the `claims_without_outcome`-th since the message's last
    /// outcome must quarantine it instead of sending it.
    pub fn must_quarantine(claims_without_outcome: u32) -> bool {
        claims_without_outcome > QUARANTINE_AFTER_CLAIMS
    }

    /// Whether the message may still be cancelled: only while it waits for a worker.
    ///
    /// # Errors
    /// A sentence for the 400 naming its state.
    pub fn check_cancellable(&self) -> Result<(), String> {
        match self.status {
            MessageStatus::Queued => Ok(()),
            MessageStatus::Sending => {
                Err("the message is being sent now and can no longer be cancelled".into())
            }
            done => Err(format!("a {} message cannot be cancelled", done.as_str())),
        }
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
    use serde_json::Map;

    use super::*;
    use crate::{
        message::{MessageKind, SmtpReply, SmtpStage},
        AccountId, ContactId, MessageId, TemplateId, Uuid,
    };

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_datetime(
            time::OffsetDateTime::from_unix_timestamp(1_800_000_000 + seconds).expect("time"),
        )
    }

    fn message(status: MessageStatus) -> Message {
        Message {
            id: MessageId::from_uuid(Uuid::from_u128(1)),
            account_id: AccountId::from_uuid(Uuid::from_u128(2)),
            contact_id: ContactId::from_uuid(Uuid::from_u128(3)),
            email: "ada@example.com".into(),
            template_id: TemplateId::from_uuid(Uuid::from_u128(4)),
            kind: MessageKind::Transactional,
            status,
            skip_reason: None,
            data: Map::new(),
            attempts: 0,
            next_attempt_at: Some(at(0)),
            last_reply: None,
            message_id_header: "<1@example.com>".into(),
            created_at: at(0),
            updated_at: at(0),
            sent_at: None,
            automation_id: None,
            announcement_id: None,
            test: false,
            form_id: None,
        }
    }

    fn rules(max_attempts: u32) -> SettleRules {
        SettleRules {
            max_attempts,
            saved_server: true,
            jitter: 0.0,
        }
    }

    fn reply(stage: SmtpStage, text: &str) -> AttemptFault {
        AttemptFault::Reply(stage, SmtpReply::parse(text).expect("reply"))
    }

    #[test]
    fn only_due_queued_or_sending_messages_are_claimed() {
        for status in MessageStatus::ALL {
            let mut claimed = message(status);
            let outcome = claimed.claim(at(0));
            if status.is_claimable() {
                assert_eq!(outcome, Ok(()), "{status:?}");
                assert_eq!(claimed.status, MessageStatus::Sending);
                assert_eq!(claimed.attempts, 0, "a claim spends no attempt");
            } else {
                assert_eq!(outcome, Err(LifecycleError::NotClaimable(status)));
                assert_eq!(claimed.status, status, "unchanged");
            }
        }
        let mut early = message(MessageStatus::Queued);
        assert_eq!(early.claim(at(-1)), Err(LifecycleError::NotDue));
        early.next_attempt_at = None;
        assert_eq!(early.claim(at(10)), Err(LifecycleError::NotDue));
        assert_eq!(early.status, MessageStatus::Queued);
    }

    #[test]
    fn a_lease_ends_after_its_length_and_is_bounded() {
        assert_eq!(lease_end(at(0), std::time::Duration::from_secs(30)), at(30));
        assert_eq!(
            lease_end(at(0), std::time::Duration::from_secs(u64::MAX)),
            at(86_400)
        );
    }

    #[test]
    fn settling_accepts_only_a_sending_message() {
        let mut queued = message(MessageStatus::Queued);
        let refused = queued.settle(SessionEnd::Accepted { summary: "250 ok" }, at(5), &rules(3));
        assert_eq!(
            refused,
            Err(LifecycleError::NotSending(MessageStatus::Queued))
        );
        assert_eq!(queued, message(MessageStatus::Queued));
    }

    #[test]
    fn an_accepted_session_sends_and_spends_an_attempt() {
        let mut sending = message(MessageStatus::Sending);
        let settled = sending
            .settle(SessionEnd::Accepted { summary: "250 ok" }, at(5), &rules(3))
            .expect("sending");
        assert_eq!(sending.status, MessageStatus::Sent);
        assert_eq!(sending.attempts, 1);
        assert_eq!(sending.sent_at, Some(at(5)));
        assert_eq!(sending.next_attempt_at, None);
        assert_eq!(sending.last_reply.as_deref(), Some("250 ok"));
        assert_eq!(settled.counter, Some(StatsCounter::Sent));
        assert!(settled.server_worked);
    }

    #[test]
    fn a_transient_refusal_retries_until_the_attempts_run_out() {
        let fault = reply(SmtpStage::ContactRecipient, "451 4.3.0 try later");
        let mut sending = message(MessageStatus::Sending);
        let settled = sending
            .settle(SessionEnd::Refused(&fault), at(5), &rules(2))
            .expect("sending");
        assert_eq!(sending.status, MessageStatus::Queued);
        assert_eq!(sending.attempts, 1);
        assert_eq!(
            sending.next_attempt_at,
            Some(at(5).plus(retry_delay(1, 0.0)))
        );
        assert_eq!(settled.counter, None);

        sending.status = MessageStatus::Sending;
        let settled = sending
            .settle(SessionEnd::Refused(&fault), at(100), &rules(2))
            .expect("sending");
        assert_eq!(sending.status, MessageStatus::Failed);
        assert_eq!(sending.attempts, 2);
        assert_eq!(sending.next_attempt_at, None);
        assert_eq!(settled.counter, Some(StatsCounter::Failed));
    }

    #[test]
    fn only_the_contacts_own_refusal_bounces_it() {
        let own = reply(SmtpStage::ContactRecipient, "550 5.1.1 no such user");
        let mut sending = message(MessageStatus::Sending);
        let settled = sending
            .settle(SessionEnd::Refused(&own), at(5), &rules(3))
            .expect("sending");
        assert_eq!(sending.status, MessageStatus::Bounced);
        assert_eq!(settled.counter, Some(StatsCounter::Bounced));
        assert_eq!(
            settled.hard_bounce.as_deref(),
            Some("550 5.1.1 no such user")
        );

        let copy = reply(
            SmtpStage::CopyRecipient("cc@example.com".into()),
            "550 5.1.1 no such user",
        );
        let mut sending = message(MessageStatus::Sending);
        let settled = sending
            .settle(SessionEnd::Refused(&copy), at(5), &rules(3))
            .expect("sending");
        assert_eq!(sending.status, MessageStatus::Failed);
        assert_eq!(settled.hard_bounce, None);
    }

    #[test]
    fn a_server_refusing_mailroom_keeps_the_attempt_and_the_message_waits() {
        let auth = reply(SmtpStage::Authentication, "535 5.7.8 bad credentials");
        let mut sending = message(MessageStatus::Sending);
        sending.attempts = 2;
        let settled = sending
            .settle(SessionEnd::Refused(&auth), at(5), &rules(3))
            .expect("sending");
        assert_eq!(sending.status, MessageStatus::Queued);
        assert_eq!(sending.attempts, 2, "no attempt spent");
        assert_eq!(sending.next_attempt_at, Some(at(5).plus(RETRY_BASE)));
        assert!(settled.server_fault.is_some());
        assert_eq!(settled.counter, None);

        // Without a saved server the same refusal is an ordinary transient one.
        let mut unsaved = message(MessageStatus::Sending);
        let settled = unsaved
            .settle(
                SessionEnd::Refused(&auth),
                at(5),
                &SettleRules {
                    saved_server: false,
                    ..rules(3)
                },
            )
            .expect("sending");
        assert_eq!(unsaved.attempts, 1);
        assert_eq!(settled.server_fault, None);
    }

    #[test]
    fn waiting_for_the_server_requeues_without_an_attempt() {
        let mut sending = message(MessageStatus::Sending);
        sending.wait_for_server("cannot open".into(), at(60), at(5));
        assert_eq!(sending.status, MessageStatus::Queued);
        assert_eq!(sending.attempts, 0);
        assert_eq!(sending.next_attempt_at, Some(at(60)));
        assert_eq!(sending.last_reply.as_deref(), Some("cannot open"));
    }

    #[test]
    fn waiting_for_a_resume_requeues_without_an_attempt_and_keeps_the_reply() {
        let mut sending = message(MessageStatus::Sending);
        sending.last_reply = Some("451 later".into());
        sending.wait_for_resume(at(60), at(5));
        assert_eq!(sending.status, MessageStatus::Queued);
        assert_eq!(sending.attempts, 0);
        assert_eq!(sending.next_attempt_at, Some(at(60)));
        assert_eq!(sending.last_reply.as_deref(), Some("451 later"));
    }

    #[test]
    fn only_a_waiting_message_may_be_cancelled() {
        assert_eq!(message(MessageStatus::Queued).check_cancellable(), Ok(()));
        assert!(message(MessageStatus::Sending)
            .check_cancellable()
            .unwrap_err()
            .contains("being sent now"));
        assert_eq!(
            message(MessageStatus::Sent).check_cancellable(),
            Err("a sent message cannot be cancelled".into())
        );
    }

    #[test]
    fn the_claim_after_three_without_an_outcome_quarantines() {
        assert!(!Message::must_quarantine(1));
        assert!(!Message::must_quarantine(QUARANTINE_AFTER_CLAIMS));
        assert!(Message::must_quarantine(QUARANTINE_AFTER_CLAIMS + 1));
    }
}
