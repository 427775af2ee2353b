//! The steps of one delivery round, for a worker to drive:
//!
//! 1. [`claim_messages`] (one transaction): leases due messages, moves them to `sending`,
//!    settles the ones suppression stops (`skipped`, counted) or that cannot be rendered
//!    (`failed`, counted), and renders the rest into [`MessageJob`]s.
//! 2. [`send_claimed_message`] (no transaction): one SMTP session per job through the
//!    [`Mailer`](crate::ports::Mailer) port.
//! 3. [`record_message_outcomes`] (one short transaction for the sessions that ended
//!    together, right after them; [`record_message_outcome`] for one): `sent`, `bounced`
//!    (contact flagged, `contact.bounced` queued), `failed`, or back to `queued` with a
//!    backoff; counted in the same transaction.
//!
//! A worker that dies between 1 and 3 leaves `sending` rows whose lease runs out; the
//! next claim takes them back, so at most the messages in flight are sent twice.

use std::time::Duration;

use mailroom_domain::{
    contact::Contact,
    mail_server::MailServer,
    message::{
        retry_delay, server_fault_delay, suppression_reason, AttemptFault, Message, MessageStatus,
        ReplyClass, SkipReason, SmtpStage, StatsCounter, Suppression, RETRY_BASE,
    },
    webhook_event::{ContactChange, ContactNotice},
};
use serde_json::{Map, Value};

use super::{claim_batch::ClaimBatch, count, send_limit::MonthlySendLimit};
use crate::{
    mail_servers::password_slot,
    ports::{
        in_transaction, Lease, MailAccepted, MailServerRecord, OutgoingMail, SavedServer,
        SmtpEndpoint, SmtpSecurity, UnitOfWork,
    },
    rendering::{render_message, AccountDefaults, Recipient, RenderedMessage, ServerDefaults},
    tracking::delivery::{apply_tracking, mint_links},
    webhook_events::queue_webhook_event,
    AppError, Services,
};

/// How the message worker runs.
#[derive(Debug, Clone)]
pub struct DeliverySettings {
    /// How long a claim holds. Longer than a whole SMTP session can take, so a live worker
    /// never loses the messages it is still sending.
    pub lease: Duration,
    /// The most messages claimed (and sent concurrently) per round.
    pub batch_size: u32,
    /// Attempts a message gets before a transient failure becomes `failed`.
    pub max_attempts: u32,
    /// Messages an account may send per UTC calendar month; `None` is no limit. Beyond
    /// it, messages are `skipped` with `free_limit_capped` (see `send_limit`).
    pub monthly_send_limit: Option<u64>,
}

/// One claimed, rendered message, ready to send.
#[derive(Debug, Clone)]
pub struct MessageJob {
    /// The message as claimed (`sending`).
    pub message: Message,
    /// What to send where.
    pub mail: OutgoingMail,
}

/// What one claim produced.
#[derive(Debug, Clone)]
pub struct ClaimedMessages {
    /// The lease held on the claimed rows.
    pub lease: Lease,
    /// How many rows were claimed (including those settled at once).
    pub claimed: usize,
    /// The messages to send.
    pub jobs: Vec<MessageJob>,
}

/// How one SMTP session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    /// The server answered the end of DATA with a 2xx reply (some Cc or Bcc may have
    /// been refused).
    Accepted(MailAccepted),
    /// It did not take the message.
    Refused(AttemptFault),
}

/// Step 1: claims up to `batch_size` due messages under a new lease and prepares them.
///
/// # Errors
/// [`AppError`] when the store fails; the transaction then rolls back and the messages
/// stay as they were.
pub fn claim_messages(
    services: &Services,
    settings: &DeliverySettings,
) -> Result<ClaimedMessages, AppError> {
    let now = services.clock.now();
    let lease = Lease {
        token: services.ids.next_uuid(),
        until: now.plus(time::Duration::try_from(settings.lease).unwrap_or(time::Duration::MINUTE)),
    };
    in_transaction(services.db.as_ref(), |tx| {
        let messages = tx.claim_due_messages(now, &lease, settings.batch_size)?;
        let claimed = messages.len();
        let mut jobs = Vec::with_capacity(claimed);
        let mut send_limit = MonthlySendLimit::new(settings.monthly_send_limit);
        let mut batch = ClaimBatch::load(tx, &messages)?;
        for message in messages {
            let prepared = prepare(tx, services, &mut batch, &message)?;
            // The monthly limit applies only to what would really be sent.
            let prepared = match prepared {
                Prepared::Send(_) if !send_limit.admit(tx, message.account_id, now)? => {
                    Prepared::Skip(SkipReason::FreeLimitCapped)
                }
                other => other,
            };
            match prepared {
                Prepared::Send(mail) => jobs.push(MessageJob {
                    message,
                    mail: *mail,
                }),
                Prepared::Skip(reason) => {
                    let mut skipped = message;
                    skipped.status = MessageStatus::Skipped;
                    skipped.skip_reason = Some(reason);
                    skipped.next_attempt_at = None;
                    skipped.updated_at = now;
                    if tx.record_message_state(&skipped, lease.token)? {
                        if let Some(counter) = reason.counter() {
                            count(tx, skipped.account_id, now, counter)?;
                        }
                    }
                }
                Prepared::WaitForServer(server, reason) => {
                    let since = tx
                        .mark_mail_server_unhealthy(
                            server.account_id,
                            server.id,
                            server.updated_at,
                            now,
                            &reason,
                        )?
                        .unwrap_or(now);
                    let mut waiting = message;
                    waiting.status = MessageStatus::Queued;
                    waiting.next_attempt_at = Some(now.plus(server_fault_delay(
                        now.as_datetime() - since.as_datetime(),
                        jitter(services),
                    )));
                    waiting.last_reply = Some(reason);
                    waiting.updated_at = now;
                    tx.record_message_state(&waiting, lease.token)?;
                }
                Prepared::Fail(reason) => {
                    let mut failed = message;
                    failed.status = MessageStatus::Failed;
                    failed.next_attempt_at = None;
                    failed.last_reply = Some(reason);
                    failed.updated_at = now;
                    if tx.record_message_state(&failed, lease.token)? {
                        count(tx, failed.account_id, now, StatsCounter::Failed)?;
                    }
                }
            }
        }
        Ok(ClaimedMessages {
            lease,
            claimed,
            jobs,
        })
    })
}

enum Prepared {
    Send(Box<OutgoingMail>),
    Skip(SkipReason),
    /// Permanent: the template is gone or does not render.
    Fail(String),
    /// The server's stored password does not open: the server is unhealthy and the
    /// message waits for it without spending an attempt.
    WaitForServer(SavedServer, String),
}

/// Applies suppression and renders, reading only (in the claim's transaction); what the
/// claim's messages share comes from `batch`.
fn prepare(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    batch: &mut ClaimBatch,
    message: &Message,
) -> Result<Prepared, AppError> {
    let account = message.account_id;
    let Some(contact) = batch.contact(tx, account, message.contact_id)? else {
        // The foreign key deletes a contact's messages with it; this is only reachable
        // in a race with the deletion, and the row is gone once that commits.
        return Ok(Prepared::Fail("the contact was deleted".into()));
    };
    let Some(template) = batch.template(tx, account, message.template_id)? else {
        return Ok(Prepared::Fail("the template was deleted".into()));
    };
    let server = batch.server(tx, account, template.preferred_mail_server)?;
    let include_unsubscribed = match origin_rules(tx, batch, message, &contact)? {
        OriginRules::Skip(reason) => return Ok(Prepared::Skip(reason)),
        OriginRules::Send {
            include_unsubscribed,
        } => include_unsubscribed,
    };
    let mut suppression = flags(&contact);
    suppression.unsubscribed &= !include_unsubscribed;
    if let Some(reason) = suppression_reason(message.kind, suppression, server.is_some()) {
        return Ok(Prepared::Skip(reason));
    }
    let Some(server) = server else {
        return Ok(Prepared::Skip(SkipReason::NoMailServer));
    };
    let account_record = batch.account(tx, account)?.ok_or(AppError::NotFound)?;
    let attributes = batch.attributes(tx, account, contact.id)?;
    let recipient = Recipient {
        email: contact.email.clone(),
        attributes: attributes
            .iter()
            .map(|(slug, value)| (slug.clone(), value.to_json()))
            .collect::<Map<String, Value>>(),
    };
    // Tracking and unsubscribe links (crate::tracking::delivery).
    let links = mint_links(services, message);
    let rendered = match render_message(
        &template,
        &AccountDefaults {
            click_tracking: account_record.click_tracking,
            open_tracking: account_record.open_tracking,
        },
        &ServerDefaults {
            default_from_email: server.server.default_from_email.clone(),
            default_from_name: server.server.default_from_name.clone(),
        },
        &recipient,
        &message.data,
        &links.render,
    ) {
        Ok(rendered) => apply_tracking(tx, services, message, rendered)?,
        Err(error) => {
            return Ok(Prepared::Fail(format!(
                "the template does not render: {error}"
            )))
        }
    };
    let endpoint = match batch.endpoint(services, account, &server) {
        Ok(endpoint) => endpoint,
        // The server's fault, not the message's (docs/api-decisions.md, "Who a refusal
        // blames"): the message waits for the server to be saved again.
        Err(reason) => {
            let server = SavedServer {
                account_id: account,
                id: server.server.id,
                updated_at: server.server.updated_at,
            };
            return Ok(Prepared::WaitForServer(server, reason));
        }
    };
    Ok(Prepared::Send(Box::new(OutgoingMail {
        endpoint,
        rendered: addressed(rendered, message),
        message_id_header: message.message_id_header.clone(),
        date: services.clock.now(),
        list_unsubscribe: links.list_unsubscribe,
    })))
}

enum OriginRules {
    Skip(SkipReason),
    Send { include_unsubscribed: bool },
}

/// What the automation or announcement behind a message says when it is due: an
/// automation's message goes out only while the automation exists and is enabled (a
/// delayed message may fall due long after it was queued); an announcement's message
/// honours `includeUnsubscribed` and its topic's unsubscriptions, also those made after
/// the audience was expanded.
fn origin_rules(
    tx: &mut dyn UnitOfWork,
    batch: &mut ClaimBatch,
    message: &Message,
    contact: &Contact,
) -> Result<OriginRules, AppError> {
    let account = message.account_id;
    if let Some(id) = message.automation_id {
        let enabled = batch
            .automation(tx, account, id)?
            .is_some_and(|automation| automation.settings.is_enabled);
        if !enabled {
            return Ok(OriginRules::Skip(SkipReason::AutomationDisabled));
        }
    }
    if let Some(id) = message.announcement_id {
        if let Some(announcement) = batch.announcement(tx, account, id)? {
            let left_topic = announcement
                .topic_id
                .is_some_and(|topic| contact.topic_unsubscriptions.contains(&topic));
            if left_topic && contact.hard_bounced_at.is_none() && contact.complaint_at.is_none() {
                return Ok(OriginRules::Skip(SkipReason::Unsubscribed));
            }
            return Ok(OriginRules::Send {
                include_unsubscribed: announcement.include_unsubscribed,
            });
        }
    }
    Ok(OriginRules::Send {
        include_unsubscribed: false,
    })
}

/// The rendered message always goes to the address the message was queued for.
fn addressed(mut rendered: RenderedMessage, message: &Message) -> RenderedMessage {
    rendered.to.email.clone_from(&message.email);
    rendered
}

fn flags(contact: &Contact) -> Suppression {
    Suppression {
        hard_bounced: contact.hard_bounced_at.is_some(),
        complained: contact.complaint_at.is_some(),
        unsubscribed: contact.unsubscribed_at.is_some(),
    }
}

/// The template's preferred server, else the account's oldest.
pub(super) fn choose_server(
    tx: &mut dyn UnitOfWork,
    account: mailroom_domain::AccountId,
    preferred: Option<mailroom_domain::MailServerId>,
) -> Result<Option<MailServerRecord>, AppError> {
    if let Some(id) = preferred {
        if let Some(record) = tx.find_mail_server(account, id)? {
            return Ok(Some(record));
        }
    }
    let first = mailroom_domain::paging::PageRequest { start: 0, limit: 1 };
    Ok(tx.list_mail_servers(account, first)?.into_iter().next())
}

pub(super) fn endpoint(
    services: &Services,
    account: mailroom_domain::AccountId,
    record: &MailServerRecord,
) -> Result<SmtpEndpoint, String> {
    let server: &MailServer = &record.server;
    let password = services
        .secrets
        .open(&record.password, &password_slot(account, server.id))
        .map_err(|_| "the mail server's stored password cannot be opened".to_owned())?;
    let security = if server.secure {
        SmtpSecurity::ImplicitTls
    } else if server.require_tls {
        SmtpSecurity::StartTlsRequired
    } else {
        SmtpSecurity::StartTlsOpportunistic
    };
    Ok(SmtpEndpoint {
        host: server.host.as_str().to_owned(),
        port: server.port,
        security,
        allow_insecure_tls: server.allow_insecure_tls,
        user: server.user.clone(),
        password,
        saved: Some(SavedServer {
            account_id: account,
            id: server.id,
            updated_at: server.updated_at,
        }),
    })
}

/// Step 2: one SMTP session for `job`, with no transaction open.
pub async fn send_claimed_message(services: &Services, job: &MessageJob) -> SendOutcome {
    match services.mailer.send(&job.mail).await {
        Ok(accepted) if accepted.reply.classify() == ReplyClass::Accepted => {
            SendOutcome::Accepted(accepted)
        }
        Ok(accepted) => SendOutcome::Refused(AttemptFault::Reply(
            SmtpStage::Data {
                contact_only: accepted.refused_copies.is_empty() && !has_copies(&job.mail),
            },
            accepted.reply,
        )),
        Err(fault) => SendOutcome::Refused(fault),
    }
}

/// Whether the message is addressed to anyone besides the contact.
fn has_copies(mail: &OutgoingMail) -> bool {
    [&mail.rendered.cc, &mail.rendered.bcc]
        .into_iter()
        .any(|list| list.as_deref().is_some_and(|list| !list.trim().is_empty()))
}

/// Step 3: records how the session of `job` ended, in its own short transaction, with
/// the counters and (for a hard bounce) the contact flag and the `contact.bounced`
/// webhook event in the same transaction. Returns the message as recorded; unchanged
/// (still `sending`) when the lease was lost meanwhile, and then nothing is written.
///
/// # Errors
/// [`AppError`] when the store fails; the row keeps its lease until it runs out and is
/// then sent again (at least once, never lost).
pub fn record_message_outcome(
    services: &Services,
    settings: &DeliverySettings,
    lease: &Lease,
    job: &MessageJob,
    outcome: &SendOutcome,
) -> Result<Message, AppError> {
    let mut recorded = record_message_outcomes(services, settings, lease, &[(job, outcome)])?;
    Ok(recorded.pop().unwrap_or_else(|| job.message.clone()))
}

/// Step 3 for the sessions that ended together: every outcome in one short transaction
/// (each as [`record_message_outcome`] would write it), with the day's counters added
/// once per account and counter. Returns the messages as recorded, in order.
///
/// # Errors
/// [`AppError`] when the store fails; nothing of the batch is written then, and its rows
/// keep their lease until it runs out and are then sent again (never lost).
pub fn record_message_outcomes(
    services: &Services,
    settings: &DeliverySettings,
    lease: &Lease,
    outcomes: &[(&MessageJob, &SendOutcome)],
) -> Result<Vec<Message>, AppError> {
    let now = services.clock.now();
    let settled: Vec<Settled> = outcomes
        .iter()
        .map(|(job, outcome)| settle(services, settings, now, job, outcome))
        .collect();
    // Rows are locked in one order (contacts by id, the day's counters last, by account),
    // so concurrent batches that share a contact wait for each other, never deadlock.
    let mut order: Vec<usize> = (0..settled.len()).collect();
    order.sort_by_key(|&i| (settled[i].message.account_id, settled[i].message.contact_id));
    // The mail servers whose health the sessions showed, each once, in id order.
    let mut faulted: Vec<(SavedServer, String)> = Vec::new();
    let mut healthy: Vec<SavedServer> = Vec::new();
    for settled in &settled {
        if let Some((server, error)) = &settled.server_fault {
            if !faulted.iter().any(|(seen, _)| same_server(seen, server)) {
                faulted.push((*server, error.clone()));
            }
        } else if let Some(server) = settled.server_worked {
            if !healthy.iter().any(|seen| same_server(seen, &server)) {
                healthy.push(server);
            }
        }
    }
    faulted.sort_by_key(|(server, _)| (server.account_id, server.id));
    healthy.retain(|server| !faulted.iter().any(|(seen, _)| same_server(seen, server)));
    healthy.sort_by_key(|server| (server.account_id, server.id));
    in_transaction(services.db.as_ref(), |tx| {
        // Messages and contacts, then mail server rows, then counters: the claim also
        // locks messages before a mail server, so no two transactions wait on each
        // other in opposite orders. How long a faulted server has been unhealthy is
        // read without a lock first (the waits only need to be about right).
        let mut unhealthy_since = Vec::with_capacity(faulted.len());
        for (server, _) in &faulted {
            let since = tx
                .find_mail_server(server.account_id, server.id)?
                .and_then(|record| record.server.unhealthy)
                .map_or(now, |unhealthy| unhealthy.since);
            unhealthy_since.push((*server, since));
        }
        let mut counts: Vec<(mailroom_domain::AccountId, StatsCounter, u64)> = Vec::new();
        let mut recorded: Vec<Message> = outcomes
            .iter()
            .map(|(job, _)| job.message.clone())
            .collect();
        for &i in &order {
            let mut settled = settled[i].clone();
            if let Some((server, _)) = &settled.server_fault {
                let since = unhealthy_since
                    .iter()
                    .find(|(seen, _)| same_server(seen, server))
                    .map_or(now, |(_, since)| *since);
                let waited = now.as_datetime() - since.as_datetime();
                settled.message.next_attempt_at =
                    Some(now.plus(server_fault_delay(waited, jitter(services))));
            }
            if !write_settled(tx, services, lease, now, &settled)? {
                continue;
            }
            if let Some(counter) = settled.counter {
                let account = settled.message.account_id;
                match counts
                    .iter_mut()
                    .find(|(a, c, _)| *a == account && *c == counter)
                {
                    Some((_, _, n)) => *n += 1,
                    None => counts.push((account, counter, 1)),
                }
            }
            recorded[i] = settled.message;
        }
        for (server, error) in &faulted {
            tx.mark_mail_server_unhealthy(
                server.account_id,
                server.id,
                server.updated_at,
                now,
                error,
            )?;
        }
        for server in &healthy {
            tx.mark_mail_server_healthy(server.account_id, server.id)?;
        }
        counts.sort_by_key(|(account, _, _)| *account);
        for (account, counter, n) in counts {
            tx.add_to_stats(account, now.as_datetime().date(), counter, n)?;
        }
        Ok(recorded)
    })
}

fn same_server(a: &SavedServer, b: &SavedServer) -> bool {
    a.account_id == b.account_id && a.id == b.id
}

/// A message's new state after its session, before it is written.
#[derive(Clone)]
struct Settled {
    message: Message,
    counter: Option<StatsCounter>,
    /// The reply of a hard bounce.
    bounce: Option<String>,
    /// The saved server refused Mailroom itself (with the fault): it becomes unhealthy
    /// and the message waits for it (`next_attempt_at` is set once its unhealthy time is
    /// known).
    server_fault: Option<(SavedServer, String)>,
    /// The saved server took the message: it is healthy again.
    server_worked: Option<SavedServer>,
}

fn settle(
    services: &Services,
    settings: &DeliverySettings,
    now: mailroom_domain::Timestamp,
    job: &MessageJob,
    outcome: &SendOutcome,
) -> Settled {
    let mut message = job.message.clone();
    message.attempts = message.attempts.saturating_add(1);
    message.updated_at = now;
    let mut counter = None;
    let mut bounce = None;
    let mut server_fault = None;
    let mut server_worked = None;
    let saved = job.mail.endpoint.saved;
    match outcome {
        SendOutcome::Accepted(accepted) => {
            message.status = MessageStatus::Sent;
            message.next_attempt_at = None;
            message.sent_at = Some(now);
            message.last_reply = Some(accepted.summary());
            counter = Some(StatsCounter::Sent);
            server_worked = saved;
        }
        SendOutcome::Refused(fault) => {
            message.last_reply = Some(fault.to_string());
            match fault.classify() {
                // Not the message's fault: it waits for the server without spending an
                // attempt (an unsaved endpoint cannot happen here; it retries as
                // transient).
                ReplyClass::ServerFault if saved.is_some() => {
                    message.attempts = job.message.attempts;
                    message.status = MessageStatus::Queued;
                    message.next_attempt_at = Some(now.plus(RETRY_BASE));
                    server_fault = saved.map(|server| (server, fault.to_string()));
                }
                ReplyClass::HardBounce => {
                    message.status = MessageStatus::Bounced;
                    message.next_attempt_at = None;
                    counter = Some(StatsCounter::Bounced);
                    bounce = Some(fault.to_string());
                }
                ReplyClass::Transient | ReplyClass::ServerFault
                    if message.attempts < settings.max_attempts =>
                {
                    message.status = MessageStatus::Queued;
                    message.next_attempt_at =
                        Some(now.plus(retry_delay(message.attempts, jitter(services))));
                }
                // A 2xx reported as a refusal cannot happen (step 2 sorts them); treat it
                // like any other permanent failure rather than guessing.
                ReplyClass::Transient
                | ReplyClass::ServerFault
                | ReplyClass::PermanentFailure
                | ReplyClass::Accepted => {
                    message.status = MessageStatus::Failed;
                    message.next_attempt_at = None;
                    counter = Some(StatsCounter::Failed);
                }
            }
        }
    }
    Settled {
        message,
        counter,
        bounce,
        server_fault,
        server_worked,
    }
}

/// Writes one settled message (not its counter); `false` when the lease was lost and
/// nothing was written.
fn write_settled(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    lease: &Lease,
    now: mailroom_domain::Timestamp,
    settled: &Settled,
) -> Result<bool, AppError> {
    let message = &settled.message;
    if !tx.record_message_state(message, lease.token)? {
        tracing::warn!(message = %message.id, "lease lost before the outcome was recorded");
        return Ok(false);
    }
    if message.status == MessageStatus::Sent {
        tx.count_message_to_contact(message.account_id, message.contact_id)?;
    }
    if let Some(reply) = &settled.bounce {
        if tx.mark_contact_hard_bounced(message.account_id, message.contact_id, now)? {
            queue_webhook_event(
                tx,
                services,
                &ContactNotice {
                    account_id: message.account_id,
                    contact_id: message.contact_id,
                    email: message.email.clone(),
                    occurred_at: now,
                    change: ContactChange::Bounced {
                        smtp_reply: reply.clone(),
                    },
                },
            )?;
        }
    }
    Ok(true)
}

/// A uniform draw from `[0, 1)` for the backoff's jitter.
fn jitter(services: &Services) -> f64 {
    let mut bytes = [0u8; 8];
    services.secrets.fill_random(&mut bytes);
    // The top 53 bits fill an f64 mantissa exactly.
    #[allow(clippy::cast_precision_loss)]
    let draw = (u64::from_le_bytes(bytes) >> 11) as f64;
    draw / (1u64 << 53) as f64
}
