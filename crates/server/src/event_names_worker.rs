//! The event-name worker: folds the insert-only increments that recording an event
//! appends into the per-name totals (`contact_event_totals`), so `GET …/events/names`
//! reads a few rows per name. [`EventNamesWorker::run_once`] is one batch, which tests
//! call directly; [`EventNamesWorker::run`] loops until shutdown. Several processes may
//! run it: `SKIP LOCKED` gives each increment to one of them.

use std::time::Duration;

use anyhow::{Context, Result};
use mailroom_app::{
    contacts::{fold_event_names, FOLD_BATCH},
    Services,
};
use tokio::sync::watch;

use crate::workers::{run_steps, Next};

/// How long the loop waits when it folded everything there was.
pub const FOLD_PAUSE: Duration = Duration::from_secs(5);

/// Folds event-name increments.
#[derive(Clone)]
pub struct EventNamesWorker {
    services: Services,
}

impl EventNamesWorker {
    /// A worker over `services`.
    pub fn new(services: Services) -> Self {
        Self { services }
    }

    /// Folds one batch of at most [`FOLD_BATCH`] increments; returns how many.
    ///
    /// # Errors
    /// When the store fails (the batch's transaction rolled back).
    pub async fn run_once(&self) -> Result<u64> {
        let services = self.services.clone();
        tokio::task::spawn_blocking(move || {
            fold_event_names(&services, FOLD_BATCH)
                .map_err(|error| anyhow::anyhow!("folding event names: {error}"))
        })
        .await
        .context("the event-name fold task")?
    }

    /// Folds batches until `shutdown` turns true: at once again after a full batch,
    /// otherwise after [`FOLD_PAUSE`].
    pub async fn run(&self, shutdown: watch::Receiver<bool>) {
        run_steps("event name fold", shutdown, None, || async move {
            let folded = self.run_once().await?;
            Ok(if folded >= u64::from(FOLD_BATCH) {
                Next::Again
            } else {
                Next::Wait(FOLD_PAUSE)
            })
        })
        .await;
    }
}
