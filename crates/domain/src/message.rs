//! Messages: one row of the outbox per email (docs/design.md#8-delivery), their states, the reading of
//! SMTP replies, the retry backoff and the daily counters.
//!
//! A message moves `queued → sending → sent | failed | bounced`, or straight to `skipped`
//! with a [`SkipReason`] when suppression stops it. Only `queued` messages are waiting for
//! a worker; `sending` is the state of a claimed message whose SMTP session is under way.

use std::fmt;

use serde_json::{Map, Value};
use time::{Date, Duration};

use crate::{
    email::EmailAddress, AccountId, AnnouncementId, AutomationId, ContactId, FormId, MessageId,
    TemplateId, Timestamp, ValidationErrors,
};

/// Where a message is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageStatus {
    /// Waiting for a worker (first attempt or a retry).
    Queued,
    /// Claimed by a worker that is talking to the mail server.
    Sending,
    /// The mail server answered 2xx to the end of DATA.
    Sent,
    /// Refused permanently for a reason that is not the recipient's, or out of attempts.
    Failed,
    /// Refused permanently because of the recipient (a hard bounce).
    Bounced,
    /// Never attempted: suppression stopped it (see [`SkipReason`]).
    Skipped,
}

impl MessageStatus {
    /// Every status, in life order.
    pub const ALL: [Self; 6] = [
        Self::Queued,
        Self::Sending,
        Self::Sent,
        Self::Failed,
        Self::Bounced,
        Self::Skipped,
    ];

    /// The wire and storage name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Sending => "sending",
            Self::Sent => "sent",
            Self::Failed => "failed",
            Self::Bounced => "bounced",
            Self::Skipped => "skipped",
        }
    }

    /// The status named `text`, if any.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == text)
    }

    /// Whether the message has reached its end (no worker will touch it again).
    pub fn is_final(self) -> bool {
        !matches!(self, Self::Queued | Self::Sending)
    }
}

/// Why suppression skipped a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// The contact hard-bounced earlier.
    BounceBlocked,
    /// The contact complained earlier.
    ComplaintBlocked,
    /// The contact unsubscribed (never applies to transactional mail).
    Unsubscribed,
    /// The account's monthly send limit was reached.
    FreeLimitCapped,
    /// The account has no mail server to send through.
    NoMailServer,
    /// An automation's message fell due after its automation was disabled or deleted.
    AutomationDisabled,
    /// The message fell due after its contact was deleted (the message outlives the
    /// contact as history; nothing is sent to an address its owner removed).
    ContactDeleted,
    /// The address is on the account's suppression list by hand (reason `manual`).
    Suppressed,
    /// The contact waits for a double opt-in confirmation: it receives nothing but the
    /// confirmation mail until it follows the link.
    PendingConfirmation,
    /// Its announcement was cancelled before the message was handed to a worker.
    Cancelled,
}

impl SkipReason {
    /// Every reason.
    pub const ALL: [Self; 10] = [
        Self::BounceBlocked,
        Self::ComplaintBlocked,
        Self::Unsubscribed,
        Self::FreeLimitCapped,
        Self::NoMailServer,
        Self::AutomationDisabled,
        Self::ContactDeleted,
        Self::Suppressed,
        Self::PendingConfirmation,
        Self::Cancelled,
    ];

    /// The wire and storage name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BounceBlocked => "bounce_blocked",
            Self::ComplaintBlocked => "complaint_blocked",
            Self::Unsubscribed => "unsubscribed",
            Self::FreeLimitCapped => "free_limit_capped",
            Self::NoMailServer => "no_mail_server",
            Self::AutomationDisabled => "automation_disabled",
            Self::ContactDeleted => "contact_deleted",
            Self::Suppressed => "suppressed",
            Self::PendingConfirmation => "pending_confirmation",
            Self::Cancelled => "cancelled",
        }
    }

    /// The reason named `text`, if any.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|reason| reason.as_str() == text)
    }

    /// The daily counter a skip for this reason counts in, if any.
    pub fn counter(self) -> Option<StatsCounter> {
        match self {
            Self::BounceBlocked => Some(StatsCounter::BounceBlocked),
            Self::ComplaintBlocked => Some(StatsCounter::ComplaintBlocked),
            Self::FreeLimitCapped => Some(StatsCounter::FreeLimitCapped),
            Self::Unsubscribed
            | Self::NoMailServer
            | Self::AutomationDisabled
            | Self::ContactDeleted
            | Self::Suppressed
            | Self::PendingConfirmation
            | Self::Cancelled => None,
        }
    }
}

/// What caused a message; decides which suppression rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageKind {
    /// A transactional send through the API: never skipped for unsubscription.
    Transactional,
    /// Sent by an automation.
    Automation,
    /// Sent by an announcement.
    Announcement,
}

impl MessageKind {
    /// The wire and storage name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transactional => "transactional",
            Self::Automation => "automation",
            Self::Announcement => "announcement",
        }
    }

    /// The kind named `text`, if any.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::Transactional, Self::Automation, Self::Announcement]
            .into_iter()
            .find(|kind| kind.as_str() == text)
    }
}

/// The suppression flags of a contact at send time: its own marks, together with the
/// entries of its address on the account's suppression list (which outlive the contact).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Suppression {
    /// The contact carries the hard-bounce flag, or its address is listed for one.
    pub hard_bounced: bool,
    /// The contact complained, or its address is listed for a complaint.
    pub complained: bool,
    /// The address is on the list by hand (`manual`): nothing goes to it.
    pub listed: bool,
    /// The contact unsubscribed from everything, or its address is listed for it.
    pub unsubscribed: bool,
}

/// The reason to skip a message of `kind` to a contact with these flags, if any. Checked
/// in order of severity: a bounce beats a complaint beats a listing by hand beats an
/// unsubscription, and only after the contact checks does a missing mail server count.
pub fn suppression_reason(
    kind: MessageKind,
    contact: Suppression,
    has_mail_server: bool,
) -> Option<SkipReason> {
    if contact.hard_bounced {
        Some(SkipReason::BounceBlocked)
    } else if contact.complained {
        Some(SkipReason::ComplaintBlocked)
    } else if contact.listed {
        Some(SkipReason::Suppressed)
    } else if contact.unsubscribed && kind != MessageKind::Transactional {
        Some(SkipReason::Unsubscribed)
    } else if !has_mail_server {
        Some(SkipReason::NoMailServer)
    } else {
        None
    }
}

/// An SMTP reply: the three-digit code, the RFC 3463 enhanced code when the text starts
/// with one, and the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmtpReply {
    /// The basic code, e.g. 550.
    pub code: u16,
    /// The enhanced status code `class.subject.detail`, e.g. (5, 1, 1).
    pub enhanced: Option<(u8, u16, u16)>,
    /// Everything after the code(s).
    pub text: String,
}

impl SmtpReply {
    /// Reads a reply line such as `550 5.1.1 <ada@example.com>: no such user` or
    /// `421-4.7.0 Try again later`; `None` when it does not start with a code 200–599.
    pub fn parse(line: &str) -> Option<Self> {
        let line = line.trim();
        let code: u16 = line.get(..3)?.parse().ok()?;
        if !(200..600).contains(&code) {
            return None;
        }
        let rest = line[3..].trim_start_matches(['-', ' ']);
        let (enhanced, text) = match rest.split_once(' ') {
            Some((first, after)) => match parse_enhanced(first) {
                Some(enhanced) => (Some(enhanced), after.trim()),
                None => (None, rest),
            },
            None => match parse_enhanced(rest) {
                Some(enhanced) => (Some(enhanced), ""),
                None => (None, rest),
            },
        };
        Some(Self {
            code,
            enhanced,
            text: text.to_owned(),
        })
    }

    /// A reply from its parts (as an SMTP client reports them).
    pub fn new(code: u16, text: &str) -> Self {
        Self::parse(&format!("{code} {text}")).unwrap_or_else(|| Self {
            code,
            enhanced: None,
            text: text.trim().to_owned(),
        })
    }

    /// How delivery reads this reply.
    pub fn classify(&self) -> ReplyClass {
        match self.code / 100 {
            2 => ReplyClass::Accepted,
            // 3xx at the end of DATA is a protocol error; 4xx is transient by definition.
            3 | 4 => ReplyClass::Transient,
            _ => {
                // An enhanced code of class 4 on a 5xx reply is contradictory; RFC 3463
                // says the basic code wins, so it stays permanent.
                let recipient = match self.enhanced {
                    // X.1.x: addressing status (bad mailbox, bad domain, …).
                    Some((_, 1, _)) => true,
                    // X.2.1 mailbox disabled, X.2.x mailbox status is the recipient's own
                    // except for "full" (5.2.2) and "too big" (5.2.3), which may change.
                    Some((_, 2, 1)) => true,
                    Some(_) => false,
                    None => matches!(self.code, 550 | 551 | 553),
                };
                if recipient {
                    ReplyClass::HardBounce
                } else {
                    ReplyClass::PermanentFailure
                }
            }
        }
    }
}

impl fmt::Display for SmtpReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code)?;
        if let Some((class, subject, detail)) = self.enhanced {
            write!(f, " {class}.{subject}.{detail}")?;
        }
        if !self.text.is_empty() {
            write!(f, " {}", self.text)?;
        }
        Ok(())
    }
}

fn parse_enhanced(word: &str) -> Option<(u8, u16, u16)> {
    let mut parts = word.split('.');
    let class: u8 = parts.next()?.parse().ok()?;
    let subject: u16 = parts.next()?.parse().ok()?;
    let detail: u16 = parts.next()?.parse().ok()?;
    (parts.next().is_none() && matches!(class, 2 | 4 | 5)).then_some((class, subject, detail))
}

/// How one delivery attempt ended, as the state machine sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyClass {
    /// 2xx: the server took the message.
    Accepted,
    /// A permanent refusal because of the recipient (5.1.x, 5.2.1, or 550/551/553 without
    /// an enhanced code) to the contact's own `RCPT TO`, or at `DATA` when the contact was
    /// the only recipient: the contact is hard-bounced.
    HardBounce,
    /// Any other permanent refusal (5xx): the message fails, the contact is not flagged.
    PermanentFailure,
    /// 4xx, time-outs, dropped connections: try again later.
    Transient,
    /// The mail server refused Mailroom itself, not the message: a 5xx to AUTH (535
    /// wrong credentials), to the greeting, EHLO or STARTTLS, or "authentication
    /// required" to `MAIL FROM`. The server is unhealthy; the message waits (no attempt
    /// counted) until its settings or the server are fixed.
    ServerFault,
}

/// The step of an SMTP session a reply answered. Who is to blame for a refusal depends
/// on it: only the contact's own `RCPT TO` (or `DATA` when nobody else was addressed)
/// speaks about the contact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SmtpStage {
    /// The greeting, EHLO and STARTTLS: before any message is named.
    Session,
    /// AUTH with the mail server's credentials.
    Authentication,
    /// `MAIL FROM`: about the sender (and the session), never about a recipient.
    MailFrom,
    /// `RCPT TO` of the message's own recipient, the contact.
    ContactRecipient,
    /// `RCPT TO` of a Cc or Bcc address (carried).
    CopyRecipient(String),
    /// `DATA` and the end of the content. `contact_only` when the contact was the only
    /// accepted recipient, so a recipient-class refusal can only be about the contact.
    Data {
        /// The contact was the transaction's only recipient.
        contact_only: bool,
    },
}

impl SmtpStage {
    /// The command name shown before a reply in a message's `lastReply`; `None` for the
    /// contact's own stages, whose replies read as they always did.
    fn label(&self) -> Option<String> {
        match self {
            Self::Session => Some("session".into()),
            Self::Authentication => Some("AUTH".into()),
            Self::MailFrom => Some("MAIL FROM".into()),
            Self::CopyRecipient(address) => Some(format!("RCPT TO <{address}>")),
            Self::ContactRecipient | Self::Data { .. } => None,
        }
    }
}

/// How a message attempt failed when no reply explains it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptFault {
    /// The server answered this reply at this stage.
    Reply(SmtpStage, SmtpReply),
    /// No answer in time, a dropped connection, a TLS or DNS failure: transient.
    Connection(String),
    /// The message cannot be built or is refused by policy before any connection (for
    /// example the egress guard): retrying gives the same answer.
    Permanent(String),
}

impl AttemptFault {
    /// How delivery reads the fault: [`SmtpReply::classify`], with the blame moved by
    /// the stage. A hard-bounce reply hard-bounces the contact only at the contact's own
    /// `RCPT TO`, or at `DATA` when the contact was the only recipient; elsewhere it is a
    /// permanent failure of the message. A 5xx before `MAIL FROM` (greeting, EHLO,
    /// STARTTLS, AUTH) and `530`/`5.7.0`/`5.7.8` ("authentication required") to
    /// `MAIL FROM` are the mail server's fault ([`ReplyClass::ServerFault`]).
    pub fn classify(&self) -> ReplyClass {
        let (stage, reply) = match self {
            Self::Reply(stage, reply) => (stage, reply),
            Self::Connection(_) => return ReplyClass::Transient,
            Self::Permanent(_) => return ReplyClass::PermanentFailure,
        };
        let class = reply.classify();
        if class == ReplyClass::Accepted || class == ReplyClass::Transient {
            return class;
        }
        match stage {
            SmtpStage::Session | SmtpStage::Authentication => ReplyClass::ServerFault,
            SmtpStage::MailFrom if reply.code == 530 || is_auth_required(reply) => {
                ReplyClass::ServerFault
            }
            SmtpStage::ContactRecipient | SmtpStage::Data { contact_only: true } => class,
            SmtpStage::MailFrom | SmtpStage::CopyRecipient(_) | SmtpStage::Data { .. } => {
                ReplyClass::PermanentFailure
            }
        }
    }
}

/// RFC 3463 / RFC 4954: 5.7.0 "authentication required" and 5.7.8 "credentials
/// invalid" on a 5xx.
fn is_auth_required(reply: &SmtpReply) -> bool {
    matches!(reply.enhanced, Some((5, 7, 0 | 8)))
}

impl fmt::Display for AttemptFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Reply(stage, reply) => match stage.label() {
                Some(label) => write!(f, "{label}: {reply}"),
                None => reply.fmt(f),
            },
            Self::Connection(text) | Self::Permanent(text) => f.write_str(text),
        }
    }
}

/// The first retry waits this long; each later one twice the one before.
pub const RETRY_BASE: Duration = Duration::seconds(60);
/// No retry waits longer than this.
pub const RETRY_CAP: Duration = Duration::hours(6);

/// How long to wait after the `attempt`-th failed attempt (counting from 1): exponential
/// from [`RETRY_BASE`], capped at [`RETRY_CAP`], with "equal jitter" so retries of a burst
/// do not arrive together: half the step is fixed, the other half scaled by `random`
/// (taken from `[0, 1)`; values outside are clamped).
pub fn retry_delay(attempt: u32, random: f64) -> Duration {
    let exponent = attempt.saturating_sub(1).min(20);
    let step = RETRY_BASE
        .checked_mul(1 << exponent)
        .map_or(RETRY_CAP, |step| step.min(RETRY_CAP));
    let half = step / 2;
    let random = if random.is_finite() {
        random.clamp(0.0, 1.0)
    } else {
        0.0
    };
    half + half * random
}

/// The longest wait of a message held back by an unhealthy mail server.
pub const SERVER_FAULT_CAP: Duration = Duration::hours(1);

/// How long a message waits after its mail server refused Mailroom itself
/// ([`ReplyClass::ServerFault`]), the server having been unhealthy for `unhealthy_for`:
/// about as long again (so the waits double while the fault lasts, and a server that has
/// just failed is tried again soon), from [`RETRY_BASE`] to [`SERVER_FAULT_CAP`], with
/// the same equal jitter as [`retry_delay`] so the waiting messages do not return
/// together.
pub fn server_fault_delay(unhealthy_for: Duration, random: f64) -> Duration {
    let step = unhealthy_for.clamp(RETRY_BASE, SERVER_FAULT_CAP);
    let half = step / 2;
    let random = if random.is_finite() {
        random.clamp(0.0, 1.0)
    } else {
        0.0
    };
    half + half * random
}

/// The daily counters of `GET …/messages/stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatsCounter {
    /// Skipped because the contact hard-bounced.
    BounceBlocked,
    /// Complaints received.
    Complained,
    /// Skipped because the contact complained.
    ComplaintBlocked,
    /// Skipped because of the monthly limit.
    FreeLimitCapped,
    /// Hard bounces.
    Bounced,
    /// First clicks.
    Clicked,
    /// Failed messages.
    Failed,
    /// First opens.
    Opened,
    /// Sent messages.
    Sent,
    /// Unsubscriptions.
    Unsubscribed,
}

impl StatsCounter {
    /// Every counter, in the order of the wire object.
    pub const ALL: [Self; 10] = [
        Self::BounceBlocked,
        Self::Complained,
        Self::ComplaintBlocked,
        Self::FreeLimitCapped,
        Self::Bounced,
        Self::Clicked,
        Self::Failed,
        Self::Opened,
        Self::Sent,
        Self::Unsubscribed,
    ];

    /// The storage column name (snake case).
    pub fn column(self) -> &'static str {
        match self {
            Self::BounceBlocked => "bounce_blocked",
            Self::Complained => "complained",
            Self::ComplaintBlocked => "complaint_blocked",
            Self::FreeLimitCapped => "free_limit_capped",
            Self::Bounced => "bounced",
            Self::Clicked => "clicked",
            Self::Failed => "failed",
            Self::Opened => "opened",
            Self::Sent => "sent",
            Self::Unsubscribed => "unsubscribed",
        }
    }

    /// The wire name (camel case).
    pub fn wire_name(self) -> &'static str {
        match self {
            Self::BounceBlocked => "bounceBlocked",
            Self::Complained => "complained",
            Self::ComplaintBlocked => "complaintBlocked",
            Self::FreeLimitCapped => "freeLimitCapped",
            Self::Bounced => "bounced",
            Self::Clicked => "clicked",
            Self::Failed => "failed",
            Self::Opened => "opened",
            Self::Sent => "sent",
            Self::Unsubscribed => "unsubscribed",
        }
    }

    fn index(self) -> usize {
        Self::ALL
            .iter()
            .position(|counter| *counter == self)
            .unwrap_or_default()
    }
}

/// One UTC day of counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DailyStats {
    /// The UTC day.
    pub day: Date,
    counts: [u64; 10],
}

impl DailyStats {
    /// A day with every counter at zero.
    pub fn zero(day: Date) -> Self {
        Self {
            day,
            counts: [0; 10],
        }
    }

    /// The value of `counter`.
    pub fn get(&self, counter: StatsCounter) -> u64 {
        self.counts[counter.index()]
    }

    /// Sets `counter`.
    pub fn set(&mut self, counter: StatsCounter, value: u64) {
        self.counts[counter.index()] = value;
    }
}

/// How many days `GET …/messages/stats` covers.
pub const STATS_DAYS: u16 = 30;

/// The [`STATS_DAYS`] UTC days ending with `today`, oldest first, taking the stored days
/// from `stored` and zeros for the rest.
pub fn stats_window(today: Date, stored: &[DailyStats]) -> Vec<DailyStats> {
    (0..i64::from(STATS_DAYS))
        .rev()
        .map(|back| {
            let day = today - Duration::days(back);
            stored
                .iter()
                .find(|stats| stats.day == day)
                .copied()
                .unwrap_or_else(|| DailyStats::zero(day))
        })
        .collect()
}

/// One email in the outbox.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Id.
    pub id: MessageId,
    /// The account.
    pub account_id: AccountId,
    /// The recipient.
    pub contact_id: ContactId,
    /// The recipient's address when the message was queued.
    pub email: String,
    /// The template it renders.
    pub template_id: TemplateId,
    /// What caused it.
    pub kind: MessageKind,
    /// Where it is.
    pub status: MessageStatus,
    /// Why it was skipped (only while `skipped`).
    pub skip_reason: Option<SkipReason>,
    /// The transactional `data` (template variables).
    pub data: Map<String, Value>,
    /// Attempts made so far.
    pub attempts: u32,
    /// When a queued message is due.
    pub next_attempt_at: Option<Timestamp>,
    /// The last SMTP reply or connection fault, as text.
    pub last_reply: Option<String>,
    /// The `Message-ID` header value, stable over retries (`<id@domain>`).
    pub message_id_header: String,
    /// Created.
    pub created_at: Timestamp,
    /// Last state change.
    pub updated_at: Timestamp,
    /// When the server accepted it.
    pub sent_at: Option<Timestamp>,
    /// The automation that queued it (only for [`MessageKind::Automation`]).
    pub automation_id: Option<AutomationId>,
    /// The announcement that queued it (only for [`MessageKind::Announcement`]).
    pub announcement_id: Option<AnnouncementId>,
    /// A test send of its template (`POST …/templates/{templateId}/test-send`): an
    /// ordinary transactional message, marked so the log can tell it apart.
    pub test: bool,
    /// The form whose confirmation mail this is: a transactional message, the only one
    /// a contact pending its confirmation receives.
    pub form_id: Option<FormId>,
}

/// The stable `Message-ID` of message `id` whose sender's domain is `domain`: the id is
/// globally unique, so the header is too, and retries reuse it so the receiver can
/// recognise a duplicate.
pub fn message_id_header(id: MessageId, domain: &str) -> String {
    format!("<{id}@{}>", message_id_domain(domain))
}

/// The id of the message whose `Message-ID` header is `header`, read back from the
/// `<id@domain>` form [`message_id_header`] writes; `None` for any other text. Feedback
/// finds the message a report quotes by this id (the store keeps every header in this
/// form, docs/operations.md "What lists and counts read").
pub fn message_id_in_header(header: &str) -> Option<MessageId> {
    let (id, _domain) = header.strip_prefix('<')?.split_once('@')?;
    MessageId::parse(id).ok()
}

/// The domain a `Message-ID` uses for the sender's domain `domain`: the domain itself
/// when it is a plain host name (letters, digits, dots and hyphens), else the reserved
/// `mailroom.invalid`.
pub fn message_id_domain(domain: &str) -> &str {
    let domain = domain.trim();
    if domain.is_empty()
        || !domain
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
    {
        "mailroom.invalid"
    } else {
        domain
    }
}

/// A fingerprint of a transactional send request, to tell a replay (same key, same body)
/// from a reuse of the key for another request: SHA-256 over the canonical JSON of the
/// template slug, the address (lower-cased), the data (keys sorted) and `sendAt` when
/// given (left out otherwise, so a request without it hashes as it always did).
pub fn request_hash(
    slug: &str,
    email: &str,
    data: &Map<String, Value>,
    send_at: Option<Timestamp>,
) -> String {
    use sha2::{Digest, Sha256};
    // serde_json's map is ordered by key, so equal objects serialise equally.
    let mut canonical = serde_json::json!({
        "slug": slug,
        "email": email.to_lowercase(),
        "data": data,
    });
    if let (Some(at), Some(object)) = (send_at, canonical.as_object_mut()) {
        object.insert("sendAt".into(), Value::from(at.unix_millis().to_string()));
    }
    hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
}

/// How far ahead a transactional send's `sendAt` may lie.
pub const MAX_SEND_AHEAD: Duration = Duration::days(30);

/// When a transactional send given `send_at` at `now` falls due: `send_at`, or `now` for
/// none or a time up to a minute past (a client's clock a little behind is no error).
///
/// # Errors
/// `sendAt` further in the past, or more than [`MAX_SEND_AHEAD`] ahead.
pub fn send_due(send_at: Option<Timestamp>, now: Timestamp) -> Result<Timestamp, ValidationErrors> {
    let Some(at) = send_at else {
        return Ok(now);
    };
    let ahead = at.as_datetime() - now.as_datetime();
    if ahead < -Duration::minutes(1) {
        return Err(ValidationErrors::single(
            "sendAt",
            "must not lie in the past",
        ));
    }
    if ahead > MAX_SEND_AHEAD {
        return Err(ValidationErrors::single(
            "sendAt",
            "must lie at most 30 days ahead",
        ));
    }
    Ok(if ahead > Duration::ZERO { at } else { now })
}

/// The filters of the message log.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MessageFilter {
    /// Only messages in this status.
    pub status: Option<MessageStatus>,
    /// Only messages to this contact.
    pub contact_id: Option<ContactId>,
    /// Only messages of this announcement.
    pub announcement_id: Option<AnnouncementId>,
    /// Only messages of this template.
    pub template_id: Option<TemplateId>,
    /// Only messages queued to this address, in any letters' case: the address as it was
    /// when queued, so it finds the messages of a contact since deleted too.
    pub email: Option<EmailAddress>,
}

/// The order of a page of the message log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MessageOrder {
    /// Oldest first: the API's default, so paging from the start never skips a message
    /// that arrives meanwhile.
    #[default]
    OldestFirst,
    /// Newest first: what a person reading the log wants to see.
    NewestFirst,
}

impl MessageOrder {
    /// The order named `text` (`oldest` or `newest`), if any.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "oldest" => Some(Self::OldestFirst),
            "newest" => Some(Self::NewestFirst),
            _ => None,
        }
    }

    /// Its name in a query string.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::OldestFirst => "oldest",
            Self::NewestFirst => "newest",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_at_is_due_then_or_now_and_refuses_the_past_and_beyond_30_days() {
        let now = Timestamp::parse("2026-06-01T12:00:00Z").expect("now");
        let at = |text: &str| Some(Timestamp::parse(text).expect("time"));
        assert_eq!(send_due(None, now), Ok(now));
        assert_eq!(
            send_due(at("2026-06-03T08:00:00Z"), now),
            Ok(at("2026-06-03T08:00:00Z").expect("time"))
        );
        assert_eq!(send_due(at("2026-06-01T11:59:30Z"), now), Ok(now));
        for refused in ["2026-06-01T11:00:00Z", "2026-07-02T12:00:01Z"] {
            assert_eq!(
                send_due(at(refused), now).expect_err(refused).0[0].field,
                "sendAt"
            );
        }
    }

    #[test]
    fn a_request_without_send_at_hashes_as_before_and_send_at_changes_the_hash() {
        let data = Map::new();
        let plain = request_hash("welcome", "A@example.com", &data, None);
        // The hash of `{"data":{},"email":"a@example.com","slug":"welcome"}`, as stored
        // by every release before `sendAt`.
        use sha2::{Digest, Sha256};
        let before = hex::encode(Sha256::digest(
            br#"{"data":{},"email":"a@example.com","slug":"welcome"}"#,
        ));
        assert_eq!(plain, before);
        let later = Timestamp::parse("2026-06-03T08:00:00Z").ok();
        assert_ne!(
            request_hash("welcome", "a@example.com", &data, later),
            plain
        );
    }

    fn class(line: &str) -> ReplyClass {
        SmtpReply::parse(line).expect(line).classify()
    }

    #[test]
    fn real_replies_are_classified() {
        use ReplyClass::{Accepted, HardBounce, PermanentFailure, Transient};
        let cases = [
            ("250 2.0.0 Ok: queued as 4BqT2x0Xyz", Accepted),
            ("250 OK id=1qA2b3-000C4d-5E", Accepted),
            ("251 2.1.5 User not local; will forward", Accepted),
            (
                "550 5.1.1 The email account that you tried to reach does not exist.",
                HardBounce,
            ),
            ("550 5.1.10 RESOLVER.ADR.RecipientNotFound", HardBounce),
            ("553 5.1.3 Invalid recipient address syntax", HardBounce),
            (
                "551 User not local; please try <forward@example.org>",
                HardBounce,
            ),
            (
                "550 Requested action not taken: mailbox unavailable",
                HardBounce,
            ),
            (
                "553 sorry, that domain isn't in my list of allowed rcpthosts",
                HardBounce,
            ),
            (
                "550 5.2.1 The email account that you tried to reach is disabled.",
                HardBounce,
            ),
            (
                "552 5.2.2 The email account that you tried to reach is over quota.",
                PermanentFailure,
            ),
            (
                "552 5.3.4 Message size exceeds fixed maximum message size",
                PermanentFailure,
            ),
            (
                "552 Requested mail action aborted: exceeded storage allocation",
                PermanentFailure,
            ),
            (
                "550 5.7.1 Message rejected as spam by Content Filtering.",
                PermanentFailure,
            ),
            (
                "554 5.7.1 Service unavailable; Client host blocked using zen.spamhaus.org",
                PermanentFailure,
            ),
            ("554 Transaction failed", PermanentFailure),
            ("421 4.7.0 Try again later, closing connection.", Transient),
            (
                "421 Service not available, closing transmission channel",
                Transient,
            ),
            (
                "450 4.2.1 The user you are trying to contact is receiving mail too quickly.",
                Transient,
            ),
            (
                "451 4.7.1 Greylisting in action, please come back later",
                Transient,
            ),
            ("452 4.2.2 Mailbox full", Transient),
            (
                "454 4.7.0 TLS not available due to local problem",
                Transient,
            ),
            ("354 End data with <CR><LF>.<CR><LF>", Transient),
        ];
        for (line, expected) in cases {
            assert_eq!(class(line), expected, "{line}");
        }
    }

    #[test]
    fn replies_keep_their_parts() {
        let reply = SmtpReply::parse("550-5.1.1 no such user").unwrap();
        assert_eq!(reply.code, 550);
        assert_eq!(reply.enhanced, Some((5, 1, 1)));
        assert_eq!(reply.text, "no such user");
        assert_eq!(reply.to_string(), "550 5.1.1 no such user");
        assert_eq!(SmtpReply::new(552, "").to_string(), "552");
        assert!(SmtpReply::parse("hello").is_none());
        assert!(SmtpReply::parse("650 nope").is_none());
        // A dotted word that is not an enhanced code stays in the text.
        assert_eq!(SmtpReply::parse("250 1.2.3.4 ok").unwrap().enhanced, None);
    }

    #[test]
    fn the_stage_decides_who_is_blamed() {
        use ReplyClass::{Accepted, HardBounce, PermanentFailure, ServerFault, Transient};
        let at = |stage: SmtpStage, line: &str| {
            AttemptFault::Reply(stage, SmtpReply::parse(line).expect(line)).classify()
        };
        let no_such_user = "550 5.1.1 no such user";
        let copy = || SmtpStage::CopyRecipient("bob@example.org".into());
        let cases = [
            (SmtpStage::ContactRecipient, no_such_user, HardBounce),
            (
                SmtpStage::ContactRecipient,
                "552 5.2.2 full",
                PermanentFailure,
            ),
            (SmtpStage::ContactRecipient, "450 4.2.1 busy", Transient),
            (copy(), no_such_user, PermanentFailure),
            (copy(), "550 mailbox unavailable", PermanentFailure),
            (SmtpStage::MailFrom, no_such_user, PermanentFailure),
            (
                SmtpStage::MailFrom,
                "550 5.7.1 sender rejected",
                PermanentFailure,
            ),
            (SmtpStage::MailFrom, "451 4.3.0 try later", Transient),
            (
                SmtpStage::MailFrom,
                "530 5.7.0 Authentication required",
                ServerFault,
            ),
            (
                SmtpStage::MailFrom,
                "550 5.7.8 bad credentials",
                ServerFault,
            ),
            (
                SmtpStage::Authentication,
                "535 5.7.8 credentials invalid",
                ServerFault,
            ),
            (SmtpStage::Authentication, "454 4.7.0 try later", Transient),
            (
                SmtpStage::Session,
                "554 5.7.1 no service for you",
                ServerFault,
            ),
            (
                SmtpStage::Data { contact_only: true },
                no_such_user,
                HardBounce,
            ),
            (
                SmtpStage::Data {
                    contact_only: false,
                },
                no_such_user,
                PermanentFailure,
            ),
            (
                SmtpStage::Data {
                    contact_only: false,
                },
                "250 2.0.0 ok",
                Accepted,
            ),
        ];
        for (stage, line, expected) in cases {
            assert_eq!(at(stage.clone(), line), expected, "{stage:?} {line}");
        }
    }

    #[test]
    fn the_stage_is_shown_unless_it_is_the_contacts_own() {
        let reply = SmtpReply::parse("550 5.1.1 no such user").unwrap();
        let shown = |stage| AttemptFault::Reply(stage, reply.clone()).to_string();
        assert_eq!(shown(SmtpStage::ContactRecipient), "550 5.1.1 no such user");
        assert_eq!(
            shown(SmtpStage::CopyRecipient("bob@example.org".into())),
            "RCPT TO <bob@example.org>: 550 5.1.1 no such user"
        );
        assert_eq!(
            shown(SmtpStage::MailFrom),
            "MAIL FROM: 550 5.1.1 no such user"
        );
    }

    #[test]
    fn faults_without_a_reply_are_transient_unless_permanent() {
        assert_eq!(
            AttemptFault::Connection("connection reset".into()).classify(),
            ReplyClass::Transient
        );
        assert_eq!(
            AttemptFault::Permanent("egress refused".into()).classify(),
            ReplyClass::PermanentFailure
        );
    }

    #[test]
    fn an_unhealthy_server_is_retried_as_long_as_it_has_been_unhealthy() {
        assert_eq!(server_fault_delay(Duration::ZERO, 1.0), RETRY_BASE);
        assert_eq!(
            server_fault_delay(Duration::minutes(10), 1.0),
            Duration::minutes(10)
        );
        assert_eq!(
            server_fault_delay(Duration::minutes(10), 0.0),
            Duration::minutes(5)
        );
        assert_eq!(server_fault_delay(Duration::days(3), 1.0), SERVER_FAULT_CAP);
        assert_eq!(
            server_fault_delay(-Duration::minutes(1), f64::NAN),
            RETRY_BASE / 2
        );
    }

    #[test]
    fn backoff_doubles_with_jitter_and_a_cap() {
        assert_eq!(retry_delay(1, 0.0), Duration::seconds(30));
        assert_eq!(retry_delay(1, 1.0), Duration::seconds(60));
        assert_eq!(retry_delay(2, 0.0), Duration::seconds(60));
        assert_eq!(retry_delay(3, 0.5), Duration::seconds(180));
        assert_eq!(retry_delay(40, 1.0), RETRY_CAP);
        assert_eq!(retry_delay(40, 0.0), RETRY_CAP / 2);
        assert_eq!(retry_delay(0, f64::NAN), Duration::seconds(30));
        for attempt in 1..30 {
            assert!(retry_delay(attempt, 0.99) <= RETRY_CAP);
            assert!(retry_delay(attempt + 1, 0.0) >= retry_delay(attempt, 0.0));
        }
    }

    #[test]
    fn suppression_applies_in_order_and_spares_transactional_unsubscribes() {
        let flags = |hard_bounced, complained, unsubscribed| Suppression {
            hard_bounced,
            complained,
            listed: false,
            unsubscribed,
        };
        use MessageKind::{Announcement, Transactional};
        assert_eq!(
            suppression_reason(Transactional, flags(true, true, true), false),
            Some(SkipReason::BounceBlocked)
        );
        assert_eq!(
            suppression_reason(Transactional, flags(false, true, false), true),
            Some(SkipReason::ComplaintBlocked)
        );
        assert_eq!(
            suppression_reason(Transactional, flags(false, false, true), true),
            None
        );
        assert_eq!(
            suppression_reason(Announcement, flags(false, false, true), true),
            Some(SkipReason::Unsubscribed)
        );
        assert_eq!(
            suppression_reason(Transactional, flags(false, false, false), false),
            Some(SkipReason::NoMailServer)
        );
        // A listing by hand stops transactional mail too, after a bounce or a complaint.
        let listed = Suppression {
            listed: true,
            unsubscribed: true,
            ..Suppression::default()
        };
        assert_eq!(
            suppression_reason(Transactional, listed, true),
            Some(SkipReason::Suppressed)
        );
        assert_eq!(
            suppression_reason(
                Announcement,
                Suppression {
                    complained: true,
                    ..listed
                },
                true
            ),
            Some(SkipReason::ComplaintBlocked)
        );
    }

    #[test]
    fn names_round_trip() {
        for status in MessageStatus::ALL {
            assert_eq!(MessageStatus::parse(status.as_str()), Some(status));
        }
        for reason in SkipReason::ALL {
            assert_eq!(SkipReason::parse(reason.as_str()), Some(reason));
        }
        assert_eq!(
            MessageKind::parse("automation"),
            Some(MessageKind::Automation)
        );
        assert!(MessageStatus::Sent.is_final() && !MessageStatus::Sending.is_final());
    }

    #[test]
    fn the_stats_window_has_thirty_days_oldest_first() {
        let today = time::macros::date!(2026 - 11 - 22);
        let mut stored = DailyStats::zero(time::macros::date!(2026 - 11 - 20));
        stored.set(StatsCounter::Sent, 3);
        let window = stats_window(today, &[stored]);
        assert_eq!(window.len(), 30);
        assert_eq!(window[0].day, time::macros::date!(2026 - 10 - 24));
        assert_eq!(window[29].day, today);
        assert_eq!(window[27].get(StatsCounter::Sent), 3);
        assert_eq!(window[28].get(StatsCounter::Sent), 0);
    }

    #[test]
    fn a_message_id_header_gives_back_its_id() {
        let id = MessageId::from_uuid(uuid::Uuid::from_u128(
            0x0190_a000_0000_7000_8000_0000_0000_0001,
        ));
        assert_eq!(
            message_id_in_header(&message_id_header(id, "example.com")),
            Some(id)
        );
        assert_eq!(
            message_id_in_header(&message_id_header(id, "bad>domain")),
            Some(id)
        );
        for other in [
            "",
            "<>",
            "<1@example.com>",
            "0190a000-0000-7000-8000-000000000001@x>",
            "<0190a000-0000-7000-8000-000000000001>",
        ] {
            assert_eq!(message_id_in_header(other), None, "{other}");
        }
    }

    #[test]
    fn message_id_headers_are_stable_and_safe() {
        let id = MessageId::from_uuid(uuid::Uuid::from_u128(7));
        assert_eq!(
            message_id_header(id, "example.com"),
            format!("<{id}@example.com>")
        );
        assert_eq!(
            message_id_header(id, "bad>domain"),
            format!("<{id}@mailroom.invalid>")
        );
    }
}
