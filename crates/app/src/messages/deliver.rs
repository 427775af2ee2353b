//! The send and record steps of delivery, for a worker to drive (the claim is in
//! [`super::claim`], rendering in [`super::prepare`]):
//!
//! 3. [`send_claimed_message`] (no transaction): one SMTP session per job through the
//!    [`Mailer`](crate::ports::Mailer) port.
//! 4. [`record_message_outcomes`] (one short transaction for the sessions that ended
//!    together, right after them; [`record_message_outcome`] for one): `sent`, `bounced`
//!    (contact flagged, `contact.bounced` queued), `failed`, or back to `queued` with a
//!    backoff; counted in the same transaction.
//!
//! A worker that dies between the claim and the record leaves `sending` rows whose lease
//! runs out; the next claim takes them back, so at most the messages in flight are sent
//! twice.

use std::collections::HashSet;

use mailroom_domain::{
    message::{
        server_fault_delay, AttemptFault, Message, MessageStatus, ReplyClass, SmtpStage,
        StatsCounter,
    },
    message_lifecycle::{SessionEnd, SettleRules, Settlement},
    suppression::{SuppressionReason, SuppressionSource},
    webhook_event::{ContactChange, ContactNotice},
    AccountId, MessageId, UserId,
};

use super::{
    lane::Lane,
    send_limit::month_of,
    settings::{jitter, DeliverySettings},
};
use crate::{
    ports::{
        in_transaction, DeliveredTo, Lease, MailAccepted, OutgoingMail, SavedServer, UnitOfWork,
    },
    suppressions::{suppress, Listing},
    webhook_events::queue_webhook_event,
    AppError, Services,
};

/// One claimed, rendered message, ready to send.
#[derive(Debug, Clone)]
pub struct MessageJob {
    /// The message as claimed (`sending`).
    pub message: Message,
    /// The server it goes through.
    pub lane: Lane,
    /// The account's owner, whose monthly count the message and its copies go to once
    /// sent (`None`: an account without an owner, counted by its daily counters alone).
    pub owner: Option<UserId>,
    /// What to send where.
    pub mail: OutgoingMail,
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
        let mut counts: Vec<(AccountId, StatsCounter, u64)> = Vec::new();
        let mut recorded: Vec<Message> = outcomes
            .iter()
            .map(|(job, _)| job.message.clone())
            .collect();
        let mut settled: Vec<Settled> = settled;
        for settled in &mut settled {
            if let Some((server, _)) = &settled.server_fault {
                let since = unhealthy_since
                    .iter()
                    .find(|(seen, _)| same_server(seen, server))
                    .map_or(now, |(_, since)| *since);
                let waited = now.as_datetime() - since.as_datetime();
                settled.message.next_attempt_at =
                    Some(now.plus(server_fault_delay(waited, jitter(services))));
            }
        }
        // Every state in one statement (set-based), then the contacts in key order: the
        // sent ones counted, the bounced ones locked before they are flagged.
        // One statement per account, so each carries a single `account_id` (one shard
        // on a database distributed by account).
        let mut written: HashSet<MessageId> = HashSet::new();
        let mut accounts: Vec<_> = settled.iter().map(|s| s.message.account_id).collect();
        accounts.sort_unstable();
        accounts.dedup();
        for account in accounts {
            let states: Vec<&Message> = settled
                .iter()
                .map(|settled| &settled.message)
                .filter(|message| message.account_id == account)
                .collect();
            written.extend(tx.record_message_states(account, &states, lease.token)?);
        }
        let mut contacts: Vec<DeliveredTo> = order
            .iter()
            .map(|&i| &settled[i].message)
            .filter(|message| written.contains(&message.id))
            // A test send changes no contact: it is not one of the contact's messages.
            .filter(|message| !message.test)
            .filter(|message| {
                message.status == MessageStatus::Sent || message.status == MessageStatus::Bounced
            })
            .map(|message| DeliveredTo {
                account: message.account_id,
                contact: message.contact_id,
                sent: u32::from(message.status == MessageStatus::Sent),
                bounced: message.status == MessageStatus::Bounced,
            })
            .collect();
        contacts.sort_by_key(|delivered| (delivered.account, delivered.contact));
        tx.count_messages_to_contacts(&contacts, now)?;
        for &i in &order {
            let settled = &settled[i];
            if !written.contains(&settled.message.id) {
                tracing::warn!(message = %settled.message.id, "lease lost before the outcome was recorded");
                continue;
            }
            flag_bounce(tx, services, now, settled)?;
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
            recorded[i] = settled.message.clone();
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
        // Last, by account like the counters: what the month's send limit counts.
        let mut sends: Vec<(AccountId, UserId, u64)> = Vec::new();
        for settled in settled.iter().filter(|s| written.contains(&s.message.id)) {
            let (Some(owner), true) = (settled.owner, settled.sends > 0) else {
                continue;
            };
            let account = settled.message.account_id;
            match sends.iter_mut().find(|(a, _, _)| *a == account) {
                Some((_, _, n)) => *n += settled.sends,
                None => sends.push((account, owner, settled.sends)),
            }
        }
        sends.sort_by_key(|(account, _, _)| *account);
        for (account, owner, n) in sends {
            tx.add_monthly_sends(owner, account, month_of(now), n)?;
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
    /// The account's owner.
    owner: Option<UserId>,
    /// Sends on the wire when the message is `sent`: one for the contact, one per copy the
    /// server took (every copy counts against the monthly limit); 0 otherwise.
    sends: u64,
}

fn settle(
    services: &Services,
    settings: &DeliverySettings,
    now: mailroom_domain::Timestamp,
    job: &MessageJob,
    outcome: &SendOutcome,
) -> Settled {
    let mut message = job.message.clone();
    let saved = job.mail.endpoint.saved;
    let summary;
    let end = match outcome {
        SendOutcome::Accepted(accepted) => {
            summary = accepted.summary();
            SessionEnd::Accepted { summary: &summary }
        }
        SendOutcome::Refused(fault) => SessionEnd::Refused(fault),
    };
    let rules = SettleRules {
        max_attempts: settings.max_attempts,
        saved_server: saved.is_some(),
        jitter: jitter(services),
    };
    // Every job is a claimed (`sending`) message; should one not be, it is written back
    // as it was (which releases the lease) rather than given a guessed outcome.
    let settlement = message.settle(end, now, &rules).unwrap_or_else(|error| {
        tracing::warn!(message = %message.id, %error, "an outcome for a message that is not sending");
        Settlement::default()
    });
    let sends = match outcome {
        SendOutcome::Accepted(accepted) if message.status == MessageStatus::Sent => {
            1 + u64::from(accepted.copies)
        }
        _ => 0,
    };
    Settled {
        message,
        counter: settlement.counter,
        bounce: settlement.hard_bounce,
        server_fault: settlement
            .server_fault
            .and_then(|fault| saved.map(|server| (server, fault))),
        server_worked: if settlement.server_worked {
            saved
        } else {
            None
        },
        owner: job.owner,
        sends,
    }
}

/// Flags the contact of a hard-bounced message (its row already locked by the batch's
/// contact step) and queues `contact.bounced` when the flag is new.
fn flag_bounce(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    now: mailroom_domain::Timestamp,
    settled: &Settled,
) -> Result<(), AppError> {
    let message = &settled.message;
    if let Some(reply) = &settled.bounce {
        // The address is listed even when the contact is gone or already marked, so a
        // contact made again for it is not mailed.
        suppress(
            tx,
            services,
            message.account_id,
            &Listing {
                email: &message.email,
                reason: SuppressionReason::HardBounce,
                source: SuppressionSource::SmtpReply,
                detail: Some(reply),
                at: now,
            },
        )?;
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
    Ok(())
}
