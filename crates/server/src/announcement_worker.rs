//! The announcement worker: [`AnnouncementWorker::run_once`] is one round (expand one
//! batch of the oldest announcement still expanding, then mark finished announcements
//! `completed`) that tests call directly; [`AnnouncementWorker::run`] loops rounds until
//! shutdown. Several processes may run it: `SKIP LOCKED` gives each batch to one of them.

use std::time::Duration;

use anyhow::{Context, Result};
use mailroom_app::{
    announcements::{complete_finished, expand_next_batch, ExpansionBatch},
    Services,
};
use tokio::sync::watch;

use crate::workers::{run_steps, Next};

/// Contacts per expansion batch (one transaction each).
pub const BATCH_SIZE: u32 = 5_000;
/// How long an idle loop waits before looking again.
pub const IDLE_POLL: Duration = Duration::from_millis(250);

/// What one round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AnnouncementRound {
    /// The batch expanded, if any announcement needed one.
    pub expanded: Option<ExpansionBatch>,
    /// Announcements marked `completed`.
    pub completed: u64,
}

/// Runs announcement rounds.
#[derive(Clone)]
pub struct AnnouncementWorker {
    services: Services,
    batch_size: u32,
}

impl AnnouncementWorker {
    /// A worker expanding `batch_size` contacts per transaction.
    pub fn new(services: Services, batch_size: u32) -> Self {
        Self {
            services,
            batch_size,
        }
    }

    /// One round: one expansion batch, then the completion check.
    ///
    /// # Errors
    /// When the store fails; the batch's transaction rolled back and the next round
    /// repeats it.
    pub async fn run_once(&self) -> Result<AnnouncementRound> {
        let (services, batch_size) = (self.services.clone(), self.batch_size);
        tokio::task::spawn_blocking(move || {
            let expanded = expand_next_batch(&services, batch_size)
                .map_err(|error| anyhow::anyhow!("expanding an announcement: {error}"))?;
            let completed = complete_finished(&services)
                .map_err(|error| anyhow::anyhow!("completing announcements: {error}"))?;
            Ok(AnnouncementRound {
                expanded,
                completed,
            })
        })
        .await
        .context("the announcement task")?
    }

    /// Runs rounds until `shutdown` turns true: at once again while there is audience to
    /// expand, otherwise after [`IDLE_POLL`] (the shared loop, [`run_steps`]).
    pub async fn run(&self, shutdown: watch::Receiver<bool>) {
        run_steps("announcement round", shutdown, None, || async move {
            let round = self.run_once().await?;
            Ok(match round.expanded {
                Some(batch) if !batch.finished => Next::Again,
                expanded => {
                    if let Some(batch) = expanded {
                        tracing::info!(announcement = %batch.announcement, "announcement audience expanded");
                    }
                    Next::Wait(IDLE_POLL)
                }
            })
        })
        .await;
    }
}
