//! Delivery step 1, the claim (one short transaction, committed before anything is
//! rendered): locks up to [`LANES_PER_CLAIM`] due lanes (accounts with due mail, from the
//! small `delivery_lanes` table), leases each one's due messages with a claim of its own
//! and counts the claim, quarantines the ones whose
//! earlier claims ended without an outcome, settles the ones suppression stops
//! (`skipped`, counted) or that cannot be prepared (`failed`, counted), applies the
//! monthly send limit, chooses each message's server (its lane) and gathers everything
//! its render reads into a [`RenderJob`].
//!
//! Rendering happens after the commit and outside any transaction (see
//! [`super::prepare`]): a render that kills its process leaves a counted claim behind,
//! so the message is quarantined after a few such claims instead of being claimed first
//! by every worker forever.

use mailroom_domain::{
    announcement::AnnouncementStatus,
    contact::Contact,
    message::{
        server_fault_delay, suppression_reason, Message, SkipReason, StatsCounter, Suppression,
    },
    message_lifecycle::lease_end,
    AccountId, MessageId, UserId, Uuid,
};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

use super::{
    claim_batch::ClaimBatch,
    count,
    lane::Lane,
    send_limit::MonthlySendLimit,
    settings::{jitter, DeliverySettings},
};
use crate::{
    ports::{in_transaction, Lease, ListUnsubscribe, SavedServer, SmtpEndpoint, UnitOfWork},
    rendering::{AccountDefaults, Recipient, RenderRequest, ServerDefaults},
    tracking::delivery::mint_links,
    AppError, Services,
};

/// The most lanes (accounts) one claim serves; each gets an equal share of the claim's
/// limit.
pub const LANES_PER_CLAIM: u32 = 8;

/// What a worker asks a claim for.
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    /// The worker's lease token: one per worker, so one statement renews everything it
    /// holds.
    pub lease_token: Uuid,
    /// The most messages to claim.
    pub limit: u32,
    /// Accounts whose lanes are full: their messages stay queued for a later claim.
    pub skip_accounts: Vec<AccountId>,
}

/// One claimed message that passed the checks, with what its render reads.
#[derive(Debug, Clone)]
pub struct RenderJob {
    /// The message as claimed (`sending`).
    pub message: Message,
    /// The server it goes through.
    pub lane: Lane,
    /// What to render.
    pub request: RenderRequest,
    pub(crate) endpoint: SmtpEndpoint,
    pub(crate) list_unsubscribe: Option<ListUnsubscribe>,
    /// The account's opened DKIM keys; the one for the rendered From is chosen after the
    /// render.
    pub(crate) signing_keys: std::sync::Arc<[crate::ports::DkimSigning]>,
    /// The account's owner, whose monthly count its sends go to.
    pub(crate) owner: Option<UserId>,
}

impl RenderJob {
    /// The owner of the message's account, when the claim found one.
    pub fn owner(&self) -> Option<UserId> {
        self.owner
    }
}

/// What one claim produced.
#[derive(Debug, Clone)]
pub struct ClaimedMessages {
    /// The lease held on the claimed rows.
    pub lease: Lease,
    /// How many rows were claimed (including those settled at once).
    pub claimed: usize,
    /// The messages to render and send.
    pub to_render: Vec<RenderJob>,
}

/// Step 1: claims up to `request.limit` due messages under the worker's lease and
/// prepares them for rendering, in one transaction.
///
/// # Errors
/// [`AppError`] when the store fails; the transaction then rolls back and the messages
/// stay as they were.
pub fn claim_messages(
    services: &Services,
    settings: &DeliverySettings,
    request: &ClaimRequest,
) -> Result<ClaimedMessages, AppError> {
    let now = services.clock.now();
    let lease = Lease {
        token: request.lease_token,
        until: lease_end(now, settings.lease),
    };
    in_transaction(services.db.as_ref(), |tx| {
        // The due lanes first (accounts; docs/operations.md, "Delivery engine"), then each
        // lane's own claim with its account in the WHERE clause, the limit shared out.
        // No more lanes than messages the claim may take: each lane takes at least one,
        // so more lanes would take the worker past its bound.
        let lanes = tx.lock_due_lanes(
            now,
            LANES_PER_CLAIM.min(request.limit),
            &request.skip_accounts,
        )?;
        let mut claims = Vec::new();
        // A lane whose claim took its whole share has more waiting (it is due again now);
        // only the others need their next due time looked up.
        let mut served: Vec<(AccountId, bool)> = Vec::with_capacity(lanes.len());
        if let Ok(count) = u32::try_from(lanes.len()) {
            let share = request.limit.checked_div(count).unwrap_or(0).max(1);
            for account in &lanes {
                // A shard that is away fails this account's claim, not the others': the
                // error names the account, and the workers leave it out for a while.
                let claimed = tx
                    .claim_due_messages(*account, now, &lease, share)
                    .map_err(|error| error.of_account(*account))?;
                served.push((*account, claimed.len() >= share as usize));
                claims.extend(claimed);
            }
        }
        claims.sort_by_key(|claim| (claim.message.next_attempt_at, claim.message.id));
        let claimed = claims.len();
        let mut to_render = Vec::with_capacity(claimed);
        let mut send_limit = MonthlySendLimit::new(settings.monthly_send_limit);
        let messages: Vec<Message> = claims.iter().map(|c| c.message.clone()).collect();
        let mut batch = ClaimBatch::load(tx, services, &messages)?;
        for claim in claims {
            // The store returns each message as it was before its claim; the domain's
            // rules make it `sending` (and refuse what the claim must not have taken).
            let mut message = claim.message;
            message.claim(now).map_err(|error| {
                AppError::Internal(format!("the store claimed message {}: {error}", message.id))
            })?;
            if Message::must_quarantine(claim.claims_without_outcome) {
                message.quarantine(now);
                tracing::warn!(message = %message.id, "message quarantined: its claims keep ending without an outcome");
                if tx.record_message_state(&message, lease.token)? {
                    count(tx, message.account_id, now, StatsCounter::Failed)?;
                }
                continue;
            }
            let checked = check(tx, services, &mut batch, &message)?;
            // The monthly limit applies only to what would really be sent.
            let checked = match checked {
                Checked::Render(job)
                    if !send_limit.admit(tx, message.account_id, job.owner, now)? =>
                {
                    Checked::Skip(SkipReason::FreeLimitCapped)
                }
                other => other,
            };
            match checked {
                Checked::Render(job) => to_render.push(*job),
                Checked::Skip(reason) => {
                    message.skip(reason, now);
                    if tx.record_message_state(&message, lease.token)? {
                        if let Some(counter) = reason.counter() {
                            count(tx, message.account_id, now, counter)?;
                        }
                    }
                }
                Checked::WaitForServer(server, reason) => {
                    let since = tx
                        .mark_mail_server_unhealthy(
                            server.account_id,
                            server.id,
                            server.updated_at,
                            now,
                            &reason,
                        )?
                        .unwrap_or(now);
                    // Back to `queued` without spending an attempt: the server is at
                    // fault, not the message (docs/api-decisions.md, "Who a refusal
                    // blames").
                    let due = now.plus(server_fault_delay(
                        now.as_datetime() - since.as_datetime(),
                        jitter(services),
                    ));
                    message.wait_for_server(reason, due, now);
                    tx.record_message_state(&message, lease.token)?;
                }
                Checked::WaitForResume => {
                    message.wait_for_resume(now.plus(PAUSED_RECHECK), now);
                    tx.record_message_state(&message, lease.token)?;
                }
                Checked::Fail(reason) => {
                    message.fail(reason, now);
                    if tx.record_message_state(&message, lease.token)? {
                        count(tx, message.account_id, now, StatsCounter::Failed)?;
                    }
                }
            }
        }
        // After every state write of the claim, so each lane sees what is left.
        tx.reschedule_lanes(&served, now)?;
        Ok(ClaimedMessages {
            lease,
            claimed,
            to_render,
        })
    })
}

enum Checked {
    Render(Box<RenderJob>),
    Skip(SkipReason),
    /// Permanent: the contact or the template is gone.
    Fail(String),
    /// The server's stored password does not open: the server is unhealthy and the
    /// message waits for it without spending an attempt.
    WaitForServer(SavedServer, String),
    /// Its announcement is paused: it waits, without spending an attempt, and is claimed
    /// again after [`PAUSED_RECHECK`] (to wait again, or to go if resumed since).
    WaitForResume,
}

/// How long a claimed message of a paused announcement waits before it is claimed again.
/// The pause holds the announcement's waiting messages out of every claim; only a
/// message that was in flight then, or whose lease ran out, comes back this way.
const PAUSED_RECHECK: time::Duration = time::Duration::minutes(1);

/// Applies suppression and the origin's rules and gathers what rendering reads (in the
/// claim's transaction); what the claim's messages share comes from `batch`.
fn check(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    batch: &mut ClaimBatch,
    message: &Message,
) -> Result<Checked, AppError> {
    let account = message.account_id;
    let Some(contact) = batch.contact(tx, account, message.contact_id)? else {
        // Messages outlive their contact (migration 16): one that falls due after the
        // deletion, or whose lease ran out while it was in flight, is skipped with the
        // reason, never lost and never sent (docs/api-decisions.md, "Contacts").
        return Ok(Checked::Skip(SkipReason::ContactDeleted));
    };
    let Some(template) = batch.template(tx, account, message.template_id)? else {
        return Ok(Checked::Fail("the template was deleted".into()));
    };
    let server = batch.server(tx, account, template.preferred_mail_server)?;
    let mut suppression = flags(&contact);
    for reason in batch.listed(account, contact.id) {
        reason.apply(&mut suppression);
    }
    let include_unsubscribed = match origin_rules(tx, batch, message, &contact, suppression)? {
        OriginRules::Skip(reason) => return Ok(Checked::Skip(reason)),
        OriginRules::WaitForResume => return Ok(Checked::WaitForResume),
        OriginRules::Send {
            include_unsubscribed,
        } => include_unsubscribed,
    };
    suppression.unsubscribed &= !include_unsubscribed;
    let reason = suppression_reason(message.kind, suppression, server.is_some());
    // A contact waiting for its double opt-in confirmation receives that mail only
    // (docs/api-decisions.md, "Subscribe forms and double opt-in"); a bounce, a
    // complaint or a listing by hand names the stronger reason.
    let pending = contact.pending_since.is_some() && message.form_id.is_none();
    match reason {
        Some(
            reason @ (SkipReason::BounceBlocked
            | SkipReason::ComplaintBlocked
            | SkipReason::Suppressed),
        ) => return Ok(Checked::Skip(reason)),
        _ if pending => return Ok(Checked::Skip(SkipReason::PendingConfirmation)),
        Some(reason) => return Ok(Checked::Skip(reason)),
        None => {}
    }
    let Some(server) = server else {
        return Ok(Checked::Skip(SkipReason::NoMailServer));
    };
    let account_record = batch.account(tx, account)?.ok_or(AppError::NotFound)?;
    let attributes = batch.attributes(tx, account, contact.id)?;
    let endpoint = match batch.endpoint(services, &account_record, &server) {
        Ok(endpoint) => endpoint,
        // The server's fault, not the message's (docs/api-decisions.md, "Who a refusal
        // blames"): the message waits for the server to be saved again.
        Err(reason) => {
            let server = SavedServer {
                account_id: account,
                id: server.server.id,
                updated_at: server.server.updated_at,
            };
            return Ok(Checked::WaitForServer(server, reason));
        }
    };
    // Tracking and unsubscribe links (crate::tracking::delivery).
    let links = mint_links(services, message);
    let request = RenderRequest {
        template: template.fields,
        template_digest: Some(template.digest),
        account: AccountDefaults {
            click_tracking: account_record.click_tracking,
            open_tracking: account_record.open_tracking,
        },
        server: ServerDefaults {
            default_from_email: server.server.default_from_email.clone(),
            default_from_name: server.server.default_from_name.clone(),
        },
        recipient: Recipient {
            email: contact.email.clone(),
            attributes: attributes
                .iter()
                .map(|(slug, value)| (slug.clone(), value.to_json()))
                .collect::<Map<String, Value>>(),
        },
        data: message.data.clone(),
        links: links.render,
    };
    Ok(Checked::Render(Box::new(RenderJob {
        message: message.clone(),
        lane: Lane {
            account,
            server: server.server.id,
        },
        request,
        endpoint,
        list_unsubscribe: links.list_unsubscribe,
        signing_keys: batch.signing_keys(account),
        owner: batch.owner(tx, account)?,
    })))
}

enum OriginRules {
    Skip(SkipReason),
    /// The announcement is paused: the message waits for the resume.
    WaitForResume,
    Send {
        include_unsubscribed: bool,
    },
}

/// What the automation or announcement behind a message says when it is due: an
/// automation's message goes out only while the automation exists and is enabled (a
/// delayed message may fall due long after it was queued); an announcement's message
/// honours `includeUnsubscribed` and its topic's unsubscriptions, also those made after
/// the audience was expanded, and it waits while the announcement is paused and is
/// skipped once it is cancelled (a retry that fell due after the pause or the cancel).
fn origin_rules(
    tx: &mut dyn UnitOfWork,
    batch: &mut ClaimBatch,
    message: &Message,
    contact: &Contact,
    suppression: Suppression,
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
            match announcement.status {
                AnnouncementStatus::Paused => return Ok(OriginRules::WaitForResume),
                AnnouncementStatus::Cancelled => {
                    return Ok(OriginRules::Skip(SkipReason::Cancelled))
                }
                _ => {}
            }
            let left_topic = announcement
                .topic_id
                .is_some_and(|topic| contact.topic_unsubscriptions.contains(&topic));
            // A bounce, a complaint or a listing by hand names the stronger reason.
            if left_topic
                && !suppression.hard_bounced
                && !suppression.complained
                && !suppression.listed
            {
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

/// The contact's own marks; the claim adds its address's entries on the list.
fn flags(contact: &Contact) -> Suppression {
    Suppression {
        hard_bounced: contact.hard_bounced_at.is_some(),
        complained: contact.complaint_at.is_some(),
        listed: false,
        unsubscribed: contact.unsubscribed_at.is_some(),
    }
}

/// Extends the lease of each of `messages` (with their accounts) the worker holds under
/// `lease_token` to `lease` from now, one statement per account (each carries its
/// `account_id`, so on a database distributed by account it runs on one shard), in one
/// transaction; returns how many it extended. A worker calls it well within the lease,
/// so a live worker keeps what it holds however slow its servers are, and a dead worker's
/// messages are free again soon after one lease. A message the worker gives up on (its
/// outcome could not be recorded) is left out, so its lease runs out and another claim
/// takes it.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn renew_message_leases(
    services: &Services,
    lease_token: Uuid,
    messages: &[(AccountId, MessageId)],
    lease: std::time::Duration,
) -> Result<u64, AppError> {
    if messages.is_empty() {
        return Ok(0);
    }
    let until = lease_end(services.clock.now(), lease);
    let mut by_account: BTreeMap<AccountId, Vec<MessageId>> = BTreeMap::new();
    for (account, id) in messages {
        by_account.entry(*account).or_default().push(*id);
    }
    let renew_all = in_transaction(services.db.as_ref(), |tx| {
        let mut renewed = 0;
        for (account, ids) in &by_account {
            renewed += tx
                .renew_message_leases(lease_token, *account, ids, until)
                .map_err(|error| error.of_account(*account))?;
        }
        Ok(renewed)
    });
    match renew_all {
        // One account's shard is away (Citus): the others' leases must not run out with
        // it, so each account is renewed on its own.
        Err(AppError::AccountUnavailable(..)) if by_account.len() > 1 => {
            let mut renewed = 0;
            let mut first_failure = None;
            for (account, ids) in &by_account {
                match in_transaction(services.db.as_ref(), |tx| {
                    Ok(tx.renew_message_leases(lease_token, *account, ids, until)?)
                }) {
                    Ok(count) => renewed += count,
                    Err(error) => {
                        tracing::warn!(%account, %error, "renewing one account's message leases failed");
                        first_failure.get_or_insert(error);
                    }
                }
            }
            match first_failure {
                Some(error) if renewed == 0 => Err(error),
                _ => Ok(renewed),
            }
        }
        other => other,
    }
}
