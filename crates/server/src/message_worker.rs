//! The message delivery worker: [`MessageWorker::run_once`] is one round (claim, send,
//! record) that tests call directly; [`MessageWorker::run`] loops rounds until shutdown.
//!
//! The database steps are synchronous (diesel) and run on the blocking pool; the SMTP
//! sessions of a round run concurrently on the async runtime with no transaction open
//! (over the mailer's pooled connections), and outcomes are recorded as soon as their
//! sessions end: the ones that finished while the previous record ran go together in one
//! short transaction, so a crash after a 250 repeats at most the messages in flight or
//! waiting for that one transaction.

use std::time::Duration;

use anyhow::{Context, Result};
use futures_util::future::join_all;
use mailroom_app::{
    messages::{
        claim_messages, record_message_outcomes, send_claimed_message, DeliverySettings,
        MessageJob, SendOutcome,
    },
    ports::Lease,
    AppError, Services,
};
use mailroom_domain::message::{AttemptFault, ReplyClass};
use mailroom_http::metrics::{delivery_counters, SmtpReplyClass};
use tokio::sync::{mpsc, watch};

use crate::Config;

/// Messages claimed (and sent concurrently) per round.
pub const BATCH_SIZE: u32 = 128;
/// Rounds one process runs side by side, each claiming its own messages (`SKIP LOCKED`).
pub const PARALLEL_ROUNDS: usize = 3;
/// How long an idle loop waits before looking for due messages again.
pub const IDLE_POLL: Duration = Duration::from_millis(100);
/// How long an outcome that could not be recorded because the database was unavailable
/// is retried; well inside the lease, which outlasts the session by a minute.
const RECORD_RETRY_FOR: Duration = Duration::from_secs(30);
const RECORD_RETRY_PAUSE: Duration = Duration::from_millis(500);

/// How long a claim holds by default: the messages of every round in the process may
/// queue for one server's connections and pace, so the lease covers that wait in the worst
/// case (each session taking its three bounded steps, resolve, connect and the rest, in
/// full) plus a margin. Only a crashed worker's messages wait this long to be taken back;
/// `MAILROOM_MESSAGE_LEASE` sets it shorter at the price of possible duplicates when a
/// server is slow.
pub fn lease(config: &Config) -> Duration {
    let in_flight = BATCH_SIZE as usize * PARALLEL_ROUNDS;
    let waves = in_flight.div_ceil(config.smtp_connections_per_server.max(1));
    let sessions = config.smtp_timeout * 3 * u32::try_from(waves).unwrap_or(u32::MAX);
    let paced = config
        .smtp_rate_limit
        .filter(|rate| *rate > 0.0)
        .map_or(Duration::ZERO, |rate| {
            Duration::from_secs_f64(in_flight as f64 / rate)
        });
    sessions + paced + Duration::from_secs(60)
}

/// What one round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MessageRound {
    /// Rows claimed (including those skipped or failed without a session).
    pub claimed: usize,
    /// SMTP sessions run.
    pub attempted: usize,
}

/// Runs message delivery rounds.
#[derive(Clone)]
pub struct MessageWorker {
    services: Services,
    settings: DeliverySettings,
}

impl MessageWorker {
    /// A worker with the configuration's attempt limit and lease: the operator's
    /// `MAILROOM_MESSAGE_LEASE` when set (checked against the SMTP timeout when the
    /// configuration is read), else one long enough that a live round never loses its
    /// messages (see [`lease`]).
    pub fn new(services: Services, config: &Config) -> Self {
        let settings = DeliverySettings {
            lease: config.message_lease.unwrap_or_else(|| lease(config)),
            batch_size: BATCH_SIZE,
            max_attempts: config.message_max_attempts,
            monthly_send_limit: config.monthly_send_limit,
        };
        Self { services, settings }
    }

    /// The settings rounds run with.
    pub fn settings(&self) -> &DeliverySettings {
        &self.settings
    }

    /// One round: claims due messages under a lease, sends them concurrently, records
    /// each outcome right after its session.
    ///
    /// # Errors
    /// When the claim fails (nothing was claimed then). A failed record is logged; its
    /// message stays leased until the lease runs out and is then sent again.
    pub async fn run_once(&self) -> Result<MessageRound> {
        let (services, settings) = (self.services.clone(), self.settings.clone());
        let batch = tokio::task::spawn_blocking(move || claim_messages(&services, &settings))
            .await
            .context("the claim task")?
            .map_err(|error| anyhow::anyhow!("claiming messages: {error}"))?;
        let (claimed, attempted, lease, jobs) =
            (batch.claimed, batch.jobs.len(), batch.lease, batch.jobs);
        let (finished, mut outcomes) = mpsc::unbounded_channel();
        let sessions = async move {
            let sends = jobs.into_iter().map(|job| {
                let finished = finished.clone();
                async move {
                    let outcome = send_claimed_message(&self.services, &job).await;
                    delivery_counters().smtp_reply(reply_class(&outcome));
                    // The receiver lives until every sender is gone.
                    let _ = finished.send((job, outcome));
                }
            });
            join_all(sends).await;
        };
        let recorder = async {
            // Whatever finished while the last record ran goes into the next one: one
            // transaction per group, each still right after its sessions.
            while let Some(first) = outcomes.recv().await {
                let mut group = vec![first];
                while let Ok(next) = outcomes.try_recv() {
                    group.push(next);
                }
                self.record(group, lease).await;
            }
        };
        tokio::join!(sessions, recorder);
        Ok(MessageRound { claimed, attempted })
    }

    async fn record(&self, group: Vec<(MessageJob, SendOutcome)>, lease: Lease) {
        let count = group.len();
        let group = std::sync::Arc::new(group);
        // The messages have been handed to their server: while the database is away, keep
        // trying to record that (a little longer than an outage of a restart takes) rather
        // than leave them `sending` until the lease runs out and send them a second time.
        let started = std::time::Instant::now();
        loop {
            let (services, settings) = (self.services.clone(), self.settings.clone());
            let batch = group.clone();
            let recorded = tokio::task::spawn_blocking(move || {
                let pairs: Vec<_> = batch.iter().map(|(job, outcome)| (job, outcome)).collect();
                record_message_outcomes(&services, &settings, &lease, &pairs)
            })
            .await;
            match recorded {
                Ok(Ok(_)) => return,
                Ok(Err(AppError::Unavailable(reason))) if started.elapsed() < RECORD_RETRY_FOR => {
                    tracing::warn!(messages = count, %reason, "recording message outcomes failed; retrying");
                    tokio::time::sleep(RECORD_RETRY_PAUSE).await;
                }
                Ok(Err(error)) => {
                    tracing::warn!(messages = count, %error, "recording message outcomes failed");
                    return;
                }
                Err(error) => {
                    tracing::warn!(messages = count, %error, "the record task failed");
                    return;
                }
            }
        }
    }

    /// Runs rounds until `shutdown` turns true: at once again after a full batch,
    /// otherwise after [`IDLE_POLL`]. A failed round is logged and retried after a pause.
    pub async fn run(&self, mut shutdown: watch::Receiver<bool>) {
        while !*shutdown.borrow() {
            let pause = match self.run_once().await {
                Ok(round) if round.claimed >= self.settings.batch_size as usize => Duration::ZERO,
                Ok(_) => IDLE_POLL,
                Err(error) => {
                    tracing::warn!(
                        error = format!("{error:#}"),
                        "message delivery round failed"
                    );
                    Duration::from_secs(1)
                }
            };
            if pause.is_zero() {
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = shutdown.changed() => {}
            }
        }
    }
}

/// How a session counts in `mailroom_smtp_replies_total`.
fn reply_class(outcome: &SendOutcome) -> SmtpReplyClass {
    match outcome {
        SendOutcome::Accepted(_) => SmtpReplyClass::Accepted,
        SendOutcome::Refused(AttemptFault::Connection(_)) => SmtpReplyClass::Connection,
        SendOutcome::Refused(fault) => match fault.classify() {
            ReplyClass::HardBounce => SmtpReplyClass::HardBounce,
            // A server refusing Mailroom itself (AUTH) is retried like a transient reply.
            ReplyClass::Transient | ReplyClass::ServerFault => SmtpReplyClass::Transient,
            ReplyClass::PermanentFailure | ReplyClass::Accepted => SmtpReplyClass::Permanent,
        },
    }
}

#[cfg(test)]
mod tests {
    use mailroom_app::ports::MailAccepted;
    use mailroom_domain::message::{SmtpReply, SmtpStage};

    use super::*;

    #[test]
    fn sessions_are_counted_by_how_they_ended() {
        let reply = |text: &str| SmtpReply::parse(text).expect("reply");
        let refused = |text: &str| {
            SendOutcome::Refused(AttemptFault::Reply(
                SmtpStage::ContactRecipient,
                reply(text),
            ))
        };
        assert_eq!(
            reply_class(&SendOutcome::Accepted(MailAccepted {
                reply: reply("250 2.0.0 ok"),
                refused_copies: Vec::new(),
            })),
            SmtpReplyClass::Accepted
        );
        assert_eq!(
            reply_class(&refused("550 5.1.1 no such user")),
            SmtpReplyClass::HardBounce
        );
        assert_eq!(
            reply_class(&refused("552 5.3.4 too big")),
            SmtpReplyClass::Permanent
        );
        assert_eq!(
            reply_class(&refused("421 4.3.2 closing")),
            SmtpReplyClass::Transient
        );
        assert_eq!(
            reply_class(&SendOutcome::Refused(AttemptFault::Connection(
                "reset".into()
            ))),
            SmtpReplyClass::Connection
        );
        assert_eq!(
            reply_class(&SendOutcome::Refused(AttemptFault::Permanent(
                "egress".into()
            ))),
            SmtpReplyClass::Permanent
        );
    }
}
