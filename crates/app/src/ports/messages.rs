use std::{future::Future, pin::Pin};

use mailroom_domain::{
    message::{
        AttemptFault, DailyStats, Message, MessageFilter, MessageOrder, SkipReason, SmtpReply,
        StatsCounter,
    },
    paging::PageRequest,
    secret::SecretString,
    sending_domain::{address_domain, DomainName},
    AccountId, ContactId, MessageId, Timestamp, UserId, Uuid,
};
use time::Date;

use super::{Lease, SmtpEndpoint};

/// What one recorded batch delivered to a contact: how many of its messages were sent,
/// and whether one bounced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveredTo {
    /// The contact's account.
    pub account: AccountId,
    /// The contact.
    pub contact: ContactId,
    /// Messages the mail server accepted.
    pub sent: u32,
    /// Whether one of its messages bounced.
    pub bounced: bool,
}

/// A message as its claim returned it.
#[derive(Debug, Clone)]
pub struct ClaimedMessage {
    /// The message as it was before the claim (`queued`, or `sending` under a lease that
    /// ran out): the caller applies [`Message::claim`], which makes it `sending` as the
    /// store already recorded.
    pub message: Message,
    /// Claims since its last outcome, this one included: more than one means earlier
    /// claims ended without an outcome (their worker died or lost the lease).
    pub claims_without_outcome: u32,
}

use crate::{rendering::RenderedMessage, StoreError};

/// A message queued with an `Idempotency-Key`, as the key's holder.
#[derive(Debug, Clone, PartialEq)]
pub struct IdempotentMessage {
    /// The message the key produced.
    pub message: Message,
    /// The hash of the request body that produced it.
    pub request_hash: String,
}

/// The message outbox and its daily counters.
pub trait MessageRepository {
    /// Stores a new message, with the request's idempotency key and body hash when given.
    ///
    /// # Errors
    /// [`StoreError::Duplicate`] ([`Duplicate::IdempotencyKey`](crate::Duplicate)) when
    /// the account already holds the key (a concurrent request won the race).
    fn insert_message(
        &mut self,
        message: &Message,
        idempotency: Option<(&str, &str)>,
    ) -> Result<(), StoreError>;

    /// Settles the message as `skipped` for `reason` if it still waits for a worker
    /// (queued or held, no lease), counters moved; `false` when it does not (a worker
    /// claimed it meanwhile, or it is final).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn skip_waiting_message(
        &mut self,
        account: AccountId,
        id: MessageId,
        reason: SkipReason,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// The message holding `key` in the account, with its request hash.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_message_by_idempotency_key(
        &mut self,
        account: AccountId,
        key: &str,
    ) -> Result<Option<IdempotentMessage>, StoreError>;

    /// Frees `key` in the account (it expired), so a new request may use it.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn release_idempotency_key(&mut self, account: AccountId, key: &str) -> Result<(), StoreError>;

    /// The message, if it is the account's.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_message(
        &mut self,
        account: AccountId,
        id: MessageId,
    ) -> Result<Option<Message>, StoreError>;

    /// One page of the account's messages under `filter`, in `order` of creation.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn list_messages(
        &mut self,
        account: AccountId,
        filter: &MessageFilter,
        order: MessageOrder,
        page: PageRequest,
    ) -> Result<Vec<Message>, StoreError>;

    /// How many messages the list shows over all pages.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn count_messages(
        &mut self,
        account: AccountId,
        filter: &MessageFilter,
    ) -> Result<u64, StoreError>;

    /// Locks up to `limit` due delivery lanes (accounts whose next message is due at
    /// `now`), earliest due first, leaving out `skip_accounts` (whose lanes are full in
    /// the claiming worker) and lanes another claim holds (skipped, never waited for).
    /// The locks last until the transaction ends; [`Self::reschedule_lanes`] must run
    /// before it commits.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn lock_due_lanes(
        &mut self,
        now: Timestamp,
        limit: u32,
        skip_accounts: &[AccountId],
    ) -> Result<Vec<AccountId>, StoreError>;

    /// Claims up to `limit` messages of `account` that are in a claimable status
    /// ([`MessageStatus::CLAIMABLE`](mailroom_domain::message::MessageStatus::CLAIMABLE):
    /// `queued`, or `sending` under a lease that ran out because their worker died) and
    /// due at `now`, earliest due first; leases them with `lease`, moves them to `sending`
    /// and counts the claim (`claims_without_outcome`, which every state write resets).
    /// Rows other workers hold locked are skipped, never waited for. `account` is in the
    /// statement's WHERE clause, so on a database distributed by account it runs on one
    /// shard.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn claim_due_messages(
        &mut self,
        account: AccountId,
        now: Timestamp,
        lease: &Lease,
        limit: u32,
    ) -> Result<Vec<ClaimedMessage>, StoreError>;

    /// Sets each of the `lanes` (accounts locked by [`Self::lock_due_lanes`], each with
    /// whether its claim took its whole share) due when the account next has something
    /// to claim: `now` for a lane whose claim was full (more is waiting), else its
    /// earliest waiting message or the end of a lease on one in flight, but not before
    /// `now` (served lanes go behind those that waited longer); no time when nothing
    /// waits.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn reschedule_lanes(
        &mut self,
        lanes: &[(AccountId, bool)],
        now: Timestamp,
    ) -> Result<(), StoreError>;

    /// Extends to `until` the lease of each of `account`'s `messages` still `sending`
    /// under `token`, in one statement; returns how many it extended.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn renew_message_leases(
        &mut self,
        token: Uuid,
        account: AccountId,
        messages: &[MessageId],
        until: Timestamp,
    ) -> Result<u64, StoreError>;

    /// Writes a message's state (status, skip reason, attempts, due time, last reply,
    /// sent time, update time) and releases the lease, but only while `lease_token` still
    /// holds it; `false` when the lease was lost.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn record_message_state(
        &mut self,
        message: &Message,
        lease_token: Uuid,
    ) -> Result<bool, StoreError>;

    /// [`Self::record_message_state`] for a batch of `account`'s messages, in one
    /// statement: writes each message's state and releases its lease where `lease_token`
    /// still holds it; returns the ids written (a message whose lease was lost, or of
    /// another account, is left out and unchanged).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn record_message_states(
        &mut self,
        account: AccountId,
        messages: &[&Message],
        lease_token: Uuid,
    ) -> Result<Vec<MessageId>, StoreError>;

    /// Locks each listed contact in key order (so concurrent batches that share contacts
    /// wait for each other in one order, never in a cycle) and, in one statement, adds its
    /// count to its `message_count` and moves its latest sent and bounced times to `at`
    /// (the engagement conditions on any message read them). A contact listed with
    /// nothing sent or bounced is only locked.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn count_messages_to_contacts(
        &mut self,
        contacts: &[DeliveredTo],
        at: Timestamp,
    ) -> Result<(), StoreError>;

    /// Sets the contact's hard-bounce flag (keeping an earlier time) and returns whether
    /// it was newly set; `false` also when there is no such contact.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn mark_contact_hard_bounced(
        &mut self,
        account: AccountId,
        contact: ContactId,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Adds `by` to `counter` of the account's UTC `day`, creating the day at zero first.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn add_to_stats(
        &mut self,
        account: AccountId,
        day: Date,
        counter: StatsCounter,
        by: u64,
    ) -> Result<(), StoreError>;

    /// The account's stored days from `first` to `last` inclusive (days without a row are
    /// missing), oldest first.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn daily_stats(
        &mut self,
        account: AccountId,
        first: Date,
        last: Date,
    ) -> Result<Vec<DailyStats>, StoreError>;

    /// The account's owner; `None` only for an account without one (none is made so).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn account_owner(&mut self, account: AccountId) -> Result<Option<UserId>, StoreError>;

    /// Adds `sends` (messages and their copies on the wire) to the account's count of the
    /// UTC month that starts on `month`, kept under its `owner`.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn add_monthly_sends(
        &mut self,
        owner: UserId,
        account: AccountId,
        month: Date,
        sends: u64,
    ) -> Result<(), StoreError>;

    /// The sends of every account `owner` owns in the UTC month that starts on `month`.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn owner_monthly_sends(&mut self, owner: UserId, month: Date) -> Result<u64, StoreError>;
}

/// One email ready for the wire.
#[derive(Debug, Clone)]
pub struct OutgoingMail {
    /// The server to hand it to.
    pub endpoint: SmtpEndpoint,
    /// The rendered message (sender, recipient, subject, bodies, cc, bcc, reply-to).
    pub rendered: RenderedMessage,
    /// The `Message-ID` header value, `<…@…>`.
    pub message_id_header: String,
    /// The `Date` header.
    pub date: Timestamp,
    /// `List-Unsubscribe` and `List-Unsubscribe-Post` (RFC 8058) for announcement and
    /// automation mail; `None` for transactional mail, which carries neither.
    pub list_unsubscribe: Option<ListUnsubscribe>,
    /// The DKIM key to sign with: set when the From address is at a verified sending
    /// domain of the account (docs/operations.md#sending-domains).
    pub dkim: Option<DkimSigning>,
    /// The envelope sender (`MAIL FROM`) when it is a VERP return path
    /// (`bounces+<token>@bounces.<domain>`, [`mailroom_domain::return_path`]); `None`
    /// sends with the From address as envelope sender.
    pub return_path: Option<String>,
}

/// A DKIM key opened for signing (relaxed/relaxed, rsa-sha256).
#[derive(Debug, Clone)]
pub struct DkimSigning {
    /// The signing domain (`d=`): the verified domain the From address is at or under.
    pub domain: DomainName,
    /// The selector (`s=`).
    pub selector: String,
    /// The private key, PKCS#1 PEM.
    pub private_key_pem: SecretString,
    /// Whether the domain's return path (`bounces.<domain>`) is verified: its mail then
    /// goes with a VERP envelope sender ([`OutgoingMail::return_path`]).
    pub return_path: bool,
}

impl DkimSigning {
    /// The key among `keys` for mail from `from`: the most specific verified domain the
    /// address is at or under; `None` when there is none.
    pub fn for_sender<'k>(keys: &'k [DkimSigning], from: &str) -> Option<&'k DkimSigning> {
        let domain = address_domain(from)?;
        keys.iter()
            .filter(|key| key.domain.covers(domain))
            .max_by_key(|key| key.domain.as_str().len())
    }
}

/// The targets of a `List-Unsubscribe` header (RFC 2369). A mailer that sends one also
/// sends `List-Unsubscribe-Post: List-Unsubscribe=One-Click` (RFC 8058), which the
/// one-click URL honours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListUnsubscribe {
    /// The one-click URL (`{public_url}/u/{token}`).
    pub url: String,
    /// A `mailto:` URI, only when the operator configured an address.
    pub mailto: Option<String>,
}

impl ListUnsubscribe {
    /// The header value: `<url>`, then `<mailto:…>` when there is one.
    pub fn header_value(&self) -> String {
        match &self.mailto {
            Some(mailto) => format!("<{}>, <{mailto}>", self.url),
            None => format!("<{}>", self.url),
        }
    }
}

/// A message the server took (2xx to the end of `DATA`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailAccepted {
    /// The server's reply to the end of `DATA`.
    pub reply: SmtpReply,
    /// Cc and Bcc addresses whose `RCPT TO` was refused (address, reply): the message
    /// went to the contact and the other recipients without them (docs/api-decisions.md,
    /// "Who a refusal blames").
    pub refused_copies: Vec<(String, SmtpReply)>,
    /// How many Cc and Bcc recipients the server took (`RCPT TO` accepted): each is one
    /// more send against the monthly limit, besides the message to the contact.
    pub copies: u32,
}

impl MailAccepted {
    /// The reply as a message's `lastReply` shows it, refused copies appended.
    pub fn summary(&self) -> String {
        let mut text = self.reply.to_string();
        for (address, reply) in &self.refused_copies {
            text.push_str(&format!("; RCPT TO <{address}> refused: {reply}"));
        }
        text
    }
}

/// What [`Mailer::send`] returns.
pub type MailFuture<'a> =
    Pin<Box<dyn Future<Output = Result<MailAccepted, AttemptFault>> + Send + 'a>>;

/// Sends email over SMTP.
pub trait Mailer: Send + Sync {
    /// Connects to the endpoint through the egress guard, secures the connection as its
    /// mode says, authenticates when AUTH is advertised, and sends `mail` to its
    /// recipients (the rendered `To`, `Cc` and `Bcc`). Never call it inside a transaction.
    ///
    /// # Errors
    /// [`AttemptFault::Reply`] with the server's refusal and the step it answered (a
    /// refused Cc or Bcc is not an error: see [`MailAccepted::refused_copies`]),
    /// [`AttemptFault::Connection`] for time-outs, dropped connections, TLS and DNS
    /// failures, [`AttemptFault::Permanent`] when the message cannot be built or the
    /// egress guard refuses the address.
    fn send<'a>(&'a self, mail: &'a OutgoingMail) -> MailFuture<'a>;
}
