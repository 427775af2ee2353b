//! The webhook delivery worker: [`WebhookWorker::run_once`] is one round (claim, send,
//! record) that tests call directly; [`WebhookWorker::run`] loops rounds until shutdown.
//!
//! The database steps are synchronous (diesel) and run on the blocking pool; the sends of a
//! round run concurrently on the async runtime with no transaction open.

use std::time::Duration;

use crate::metrics::delivery_counters;
use anyhow::{Context, Result};
use futures_util::future::join_all;
use mailroom_app::{
    webhook_events::{
        claim_webhook_deliveries, record_webhook_attempts, send_webhook_delivery, DeliveryRound,
        DeliverySettings,
    },
    Services,
};
use mailroom_domain::webhook_event::RetrySchedule;
use tokio::sync::watch;

use crate::Config;

/// Events claimed (and sent concurrently) per round.
pub const BATCH_SIZE: u32 = 128;
/// Rounds one process runs side by side: while one records, another sends. Each claims
/// its own events (`SKIP LOCKED`), as separate processes would.
pub const PARALLEL_ROUNDS: usize = 4;
/// How long an idle loop waits before looking for due events again.
pub const IDLE_POLL: Duration = Duration::from_millis(50);

/// Runs webhook delivery rounds.
#[derive(Clone)]
pub struct WebhookWorker {
    services: Services,
    settings: DeliverySettings,
}

impl WebhookWorker {
    /// A worker with the configuration's retry schedule. The lease outlasts two attempt
    /// timeouts plus a margin, so a live round never loses its events: it sends for at
    /// most one timeout and then records at once.
    pub fn new(services: Services, config: &Config) -> Self {
        let settings = DeliverySettings {
            schedule: RetrySchedule::from_secs(&config.webhook_retry_schedule),
            lease: config.webhook_timeout * 2 + Duration::from_secs(30),
            batch_size: BATCH_SIZE,
        };
        Self { services, settings }
    }

    /// The settings rounds run with.
    pub fn settings(&self) -> &DeliverySettings {
        &self.settings
    }

    /// One round: claims the due events under a lease, sends them concurrently, records
    /// each attempt.
    ///
    /// # Errors
    /// When the database fails; claimed events then stay leased until the lease runs out
    /// and are attempted again.
    pub async fn run_once(&self) -> Result<DeliveryRound> {
        let (services, settings) = (self.services.clone(), self.settings.clone());
        let batch =
            tokio::task::spawn_blocking(move || claim_webhook_deliveries(&services, &settings))
                .await
                .context("the claim task")?
                .map_err(|error| anyhow::anyhow!("claiming webhook events: {error}"))?;
        if batch.deliveries.is_empty() {
            return Ok(DeliveryRound::default());
        }
        let sends = batch
            .deliveries
            .into_iter()
            .map(|delivery| send_webhook_delivery(&self.services, delivery));
        let reports = join_all(sends).await;
        let (services, settings, lease) =
            (self.services.clone(), self.settings.clone(), batch.lease);
        let round = tokio::task::spawn_blocking(move || {
            record_webhook_attempts(&services, &settings, &lease, reports)
        })
        .await
        .context("the record task")?
        .map_err(|error| anyhow::anyhow!("recording webhook attempts: {error}"))?;
        delivery_counters().webhook_deliveries(round.delivered, round.retrying, round.failed);
        Ok(round)
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
                        "webhook delivery round failed"
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
