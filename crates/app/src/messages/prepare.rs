//! Delivery step 2, preparing: each [`RenderJob`] of a committed claim is rendered with no
//! transaction open (by whatever renderer the worker chooses: in-process with
//! [`render_in_process`], or a process of its own whose memory is bounded), then one short
//! transaction stores the tracking links of the rendered ones and fails the rest
//! (`failed`, counted, with the reason as `lastReply`).

use mailroom_domain::message::{Message, StatsCounter};

use super::{
    claim::{ClaimRequest, RenderJob},
    claim_messages, count,
    deliver::MessageJob,
    settings::DeliverySettings,
};
use crate::{
    ports::{in_transaction, DkimSigning, Lease, OutgoingMail},
    rendering::RenderedMessage,
    tracking::delivery::apply_tracking,
    AppError, Services,
};

/// How one render ended: the message, or why it cannot be rendered (permanent for this
/// template and input).
pub type RenderOutcome = Result<RenderedMessage, String>;

/// Renders in this process: bounded in time (fuel) and output, not in the memory the
/// values built while rendering take; see `docs/operations.md` ("Delivery engine").
pub fn render_in_process(job: &RenderJob) -> RenderOutcome {
    job.request.render().map_err(|error| error.to_string())
}

/// What a claim prepared for sending.
#[derive(Debug, Clone)]
pub struct PreparedMessages {
    /// The lease held on the claimed rows.
    pub lease: Lease,
    /// How many rows were claimed (including those settled at once).
    pub claimed: usize,
    /// The messages to send.
    pub jobs: Vec<MessageJob>,
}

/// Steps 1 and 2 together: claims (committed), renders each message with `render` outside
/// any transaction, then stores links and render failures in one short transaction.
///
/// # Errors
/// [`AppError`] when the store fails. After the claim committed, the claimed messages
/// stay leased until the lease runs out, and the counted claim moves them towards
/// quarantine.
pub fn prepare_messages(
    services: &Services,
    settings: &DeliverySettings,
    request: &ClaimRequest,
    render: impl Fn(&RenderJob) -> RenderOutcome,
) -> Result<PreparedMessages, AppError> {
    let claim = claim_messages(services, settings, request)?;
    let rendered: Vec<(RenderJob, RenderOutcome)> = claim
        .to_render
        .into_iter()
        .map(|job| {
            let outcome = render(&job);
            (job, outcome)
        })
        .collect();
    let jobs = if rendered.is_empty() {
        Vec::new()
    } else {
        finish_rendered(services, &claim.lease, rendered, &[])?
    };
    Ok(PreparedMessages {
        lease: claim.lease,
        claimed: claim.claimed,
        jobs,
    })
}

/// Stores the tracking links of the rendered messages and fails the ones that did not
/// render, in one transaction; returns the messages to send. The `deferred` ones (not
/// rendered in this claim) go back to the queue, due at once, with no attempt spent.
///
/// # Errors
/// [`AppError`] when the store fails; nothing is written then.
pub fn finish_rendered(
    services: &Services,
    lease: &Lease,
    rendered: Vec<(RenderJob, RenderOutcome)>,
    deferred: &[RenderJob],
) -> Result<Vec<MessageJob>, AppError> {
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| {
        for job in deferred {
            let mut later = job.message.clone();
            later.defer(now);
            tx.record_message_state(&later, lease.token)?;
        }
        let mut jobs = Vec::with_capacity(rendered.len());
        for (job, outcome) in &rendered {
            match outcome {
                Ok(message) => {
                    let message_rendered =
                        apply_tracking(tx, services, &job.message, message.clone())?;
                    let rendered = addressed(message_rendered, &job.message);
                    let dkim =
                        DkimSigning::for_sender(&job.signing_keys, &rendered.from.email).cloned();
                    let return_path = dkim.as_ref().filter(|key| key.return_path).map(|key| {
                        crate::return_path::envelope_sender(services, &job.message, &key.domain)
                    });
                    jobs.push(MessageJob {
                        message: job.message.clone(),
                        lane: job.lane,
                        owner: job.owner,
                        mail: OutgoingMail {
                            endpoint: job.endpoint.clone(),
                            rendered,
                            message_id_header: job.message.message_id_header.clone(),
                            date: now,
                            list_unsubscribe: job.list_unsubscribe.clone(),
                            dkim,
                            return_path,
                        },
                    });
                }
                Err(reason) => {
                    let mut failed = job.message.clone();
                    failed.fail(format!("the template does not render: {reason}"), now);
                    if tx.record_message_state(&failed, lease.token)? {
                        count(tx, failed.account_id, now, StatsCounter::Failed)?;
                    }
                }
            }
        }
        Ok(jobs)
    })
}

/// The rendered message always goes to the address the message was queued for.
fn addressed(mut rendered: RenderedMessage, message: &Message) -> RenderedMessage {
    rendered.to.email.clone_from(&message.email);
    rendered
}
